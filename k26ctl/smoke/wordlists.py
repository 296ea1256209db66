"""wordfreq's word lists in the two forms the detectors use, cached on disk.

The detectors ask only whether a word is in a list and which words a language uses most. Importing
wordfreq and reading its lists (msgpack, a float per word) cost about 0.9 s CPU in every process that
scores (each scoring worker paid it again), so both answers are kept per list as marshal files under
$XDG_CACHE_HOME/k26ctl/wordlists/wordfreq-<version>/, written atomically on first use and read in
milliseconds after that. The head of a list (its most frequent words) has a file of its own, so
guessing a language does not read the whole lists of all candidate languages. Without a usable cache
directory the lists come from wordfreq in every process, as before.
"""

from __future__ import annotations

import marshal
import os
import sys
from functools import lru_cache
from pathlib import Path

HEAD = 100  # most frequent words kept in rank order (function words are the first few dozen)


@lru_cache(maxsize=128)
def members(lang: str, wordlist: str) -> frozenset[str]:
    """Every word of wordfreq's `wordlist` ("small", "best", ...) for `lang`."""
    cached = _read(lang, wordlist, "words")
    if isinstance(cached, frozenset):
        return cached
    return _build(lang, wordlist)[1]


@lru_cache(maxsize=128)
def ranked_head(lang: str, wordlist: str) -> tuple[str, ...]:
    """The list's HEAD most frequent words, most frequent first (ties in wordfreq's order)."""
    cached = _read(lang, wordlist, "head")
    if isinstance(cached, tuple):
        return cached
    return _build(lang, wordlist)[0]


def _build(lang: str, wordlist: str) -> tuple[tuple[str, ...], frozenset[str]]:
    import wordfreq

    freqs = wordfreq.get_frequency_dict(lang, wordlist)
    head = tuple(sorted(freqs, key=freqs.__getitem__, reverse=True)[:HEAD])
    words = frozenset(freqs)
    _write(lang, wordlist, "head", head)
    _write(lang, wordlist, "words", words)
    return head, words


@lru_cache(maxsize=1)
def cache_dir() -> Path | None:
    """Where the lists are kept for the installed wordfreq and this Python's marshal format."""
    from importlib import metadata

    try:
        version = metadata.version("wordfreq")
    except metadata.PackageNotFoundError:
        return None
    from k26ctl import statedir
    from k26ctl.errors import ConfigError

    try:
        base = statedir.cache_root()
    except ConfigError:  # no home: the lists are built in memory each run instead
        return None
    python = f"py{sys.version_info[0]}{sys.version_info[1]}-m{marshal.version}"
    return Path(base) / "k26ctl" / "wordlists" / f"wordfreq-{version}-{python}"


def _path(lang: str, wordlist: str, part: str) -> Path | None:
    directory = cache_dir()
    name = f"{lang}-{wordlist}-{part}{HEAD if part == 'head' else ''}.marshal"
    return None if directory is None else directory / name


def _read(lang: str, wordlist: str, part: str) -> object:
    path = _path(lang, wordlist, part)
    if path is None:
        return None
    try:
        return marshal.loads(path.read_bytes())
    except (OSError, EOFError, ValueError, TypeError):
        return None  # absent or unreadable: rebuilt from wordfreq


def _write(lang: str, wordlist: str, part: str, value: tuple[str, ...] | frozenset[str]) -> None:
    path = _path(lang, wordlist, part)
    if path is None:
        return
    import tempfile

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(marshal.dumps(value))
            os.replace(tmp, path)  # readers see the old file or the whole new one, never half
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError:
        pass  # a read-only or full cache directory only costs the next process the same build
