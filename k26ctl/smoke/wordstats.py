"""One pass over a text's words, shared by the word-level detectors.

A word is a maximal run of letters (with combining marks and inner apostrophes). Each word also knows
the scripts it is written in (Unicode script properties from the `regex` module): a word that switches
from Latin to Cyrillic or Telugu part-way is a sign of random vocabulary entries glued together.
`words_of` caches its last results, since several detectors ask about the same text.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import NamedTuple

import regex

# Scripts named by their Unicode property; letters of any other script are "Other".
# fmt: off
SCRIPTS = (
    "Latin", "Cyrillic", "Greek", "Arabic", "Hebrew", "Han", "Hiragana", "Katakana", "Hangul", "Thai",
    "Devanagari", "Bengali", "Tamil", "Telugu", "Kannada", "Malayalam", "Gujarati", "Gurmukhi",
    "Georgian", "Armenian", "Ethiopic", "Myanmar", "Khmer", "Lao", "Sinhala", "Tibetan",
)
# fmt: on
_RUN = regex.compile(
    "|".join(f"(?P<{name}>\\p{{Script={name}}}[\\p{{Script={name}}}\\p{{M}}]*)" for name in SCRIPTS)
    + r"|(?P<Other>\p{L}[\p{L}\p{M}]*)"
)
# Japanese mixes Han with kana; Korean may carry Han; Chinese, Japanese and Korean writing glue Latin
# terms to their own words without spaces ("使用Python", "APIを", "API를").
_FRIENDS = (
    frozenset({"Han", "Hiragana", "Katakana", "Latin"}),
    frozenset({"Han", "Hangul", "Latin"}),
)


class Word(NamedTuple):
    text: str
    start: int
    end: int
    scripts: tuple[str, ...]  # scripts of the word's letter runs, in order
    run_lengths: tuple[int, ...]  # letters in each of those runs
    script: str  # the first of them
    mixed: bool  # the word switches between scripts that are not written together


def _is_mixed(scripts: tuple[str, ...]) -> bool:
    kinds = set(scripts)
    return len(kinds) > 1 and not any(kinds <= group for group in _FRIENDS)


_WORD = regex.compile(r"\p{L}[\p{L}\p{M}]*(?:['\u2019]\p{L}[\p{L}\p{M}]*)*")
# The same words in an ASCII text (no marks, no U+2019), found by the faster `re` engine.
_ASCII_WORD = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)*")
_LATIN = ("Latin",)
# Words are built with tuple.__new__: NamedTuple's generated __new__ is a Python call per word.
_new_word = tuple.__new__


@lru_cache(maxsize=8)
def words_of(text: str) -> tuple[Word, ...]:
    """Letter runs (with inner apostrophes: "don't") between digits, punctuation and spaces; a word
    glued together from runs of several scripts is one word that knows its runs."""
    if text.isascii():
        found = [(m.group(), m.start(), m.end()) for m in _ASCII_WORD.finditer(text)]
        return tuple([_new_word(Word, (w, a, b, _LATIN, (b - a,), "Latin", False)) for w, a, b in found])
    words: list[Word] = []
    for match in _WORD.finditer(text):
        word = match.group()
        if word.isascii():
            start, end = match.span()
            words.append(_new_word(Word, (word, start, end, _LATIN, (end - start,), "Latin", False)))
            continue
        scripts: list[str] = []
        lengths: list[int] = []
        for run in _RUN.finditer(word):
            name = run.lastgroup or "Other"
            if scripts and scripts[-1] == name:
                lengths[-1] += run.end() - run.start()
            else:
                scripts.append(name)
                lengths.append(run.end() - run.start())
        runs = tuple(scripts)
        start, end = match.span()
        words.append(_new_word(Word, (word, start, end, runs, tuple(lengths), runs[0], _is_mixed(runs))))
    return tuple(words)
