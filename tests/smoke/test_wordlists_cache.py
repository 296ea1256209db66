"""The on-disk form of wordfreq's lists: same answers as wordfreq, written once, rebuilt when damaged,
and optional when the cache directory cannot be written."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import wordfreq

from k26ctl.smoke import wordlists


@pytest.fixture
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    for cached in (wordlists.cache_dir, wordlists.members, wordlists.ranked_head):
        cached.cache_clear()
    yield tmp_path
    for cached in (wordlists.cache_dir, wordlists.members, wordlists.ranked_head):
        cached.cache_clear()


def _from_wordfreq(lang: str) -> tuple[tuple[str, ...], frozenset[str]]:
    freqs = wordfreq.get_frequency_dict(lang, "small")
    head = tuple(sorted(freqs, key=freqs.__getitem__, reverse=True)[: wordlists.HEAD])
    return head, frozenset(freqs)


def test_lists_are_written_once_and_read_back_unchanged(cache_home: Path) -> None:
    head, words = _from_wordfreq("fr")
    assert wordlists.ranked_head("fr", "small") == head
    assert wordlists.members("fr", "small") == words
    directory = wordlists.cache_dir()
    assert directory is not None and directory.is_relative_to(cache_home)
    files = sorted(p.name for p in directory.iterdir())
    assert files == ["fr-small-head100.marshal", "fr-small-words.marshal"]
    # a new process (caches cleared) reads the files instead of wordfreq
    wordlists.members.cache_clear()
    wordlists.ranked_head.cache_clear()
    stamp = (directory / "fr-small-words.marshal").stat().st_mtime_ns
    assert wordlists.members("fr", "small") == words
    assert wordlists.ranked_head("fr", "small")[:3] == head[:3]
    assert (directory / "fr-small-words.marshal").stat().st_mtime_ns == stamp


def test_a_damaged_file_is_rebuilt(cache_home: Path) -> None:
    _head, words = _from_wordfreq("de")
    wordlists.members("de", "small")
    directory = wordlists.cache_dir()
    assert directory is not None
    (directory / "de-small-words.marshal").write_bytes(b"\xe7\x00not marshal")
    wordlists.members.cache_clear()
    assert wordlists.members("de", "small") == words
    wordlists.members.cache_clear()
    assert wordlists.members("de", "small") == words  # the rewritten file reads back


def test_an_unwritable_cache_directory_still_answers(cache_home: Path) -> None:
    (cache_home / "k26ctl").write_text("a file where the directory would go")
    head, words = _from_wordfreq("it")
    assert wordlists.members("it", "small") == words
    assert wordlists.ranked_head("it", "small") == head
