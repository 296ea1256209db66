"""One pass over a text's words, shared by the word-level detectors.

A word is a maximal run of letters (with combining marks and inner apostrophes). Each word also knows
the scripts it is written in (Unicode script properties from the `regex` module): a word that switches
from Latin to Cyrillic or Telugu part-way is a sign of random vocabulary entries glued together.
`words_of` caches its last results, since several detectors ask about the same text.
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

import regex

# Scripts named by their Unicode property; letters of any other script are "Other".
SCRIPTS = (
    "Latin", "Cyrillic", "Greek", "Arabic", "Hebrew", "Han", "Hiragana", "Katakana", "Hangul", "Thai",
    "Devanagari", "Bengali", "Tamil", "Telugu", "Kannada", "Malayalam", "Gujarati", "Gurmukhi",
    "Georgian", "Armenian", "Ethiopic", "Myanmar", "Khmer", "Lao", "Sinhala", "Tibetan",
)
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

    @property
    def script(self) -> str:
        return self.scripts[0]

    @property
    def mixed(self) -> bool:
        """The word switches between scripts that are not written together."""
        kinds = set(self.scripts)
        return len(kinds) > 1 and not any(kinds <= group for group in _FRIENDS)


_WORD = regex.compile(r"\p{L}[\p{L}\p{M}]*(?:['\u2019]\p{L}[\p{L}\p{M}]*)*")
_LATIN = ("Latin",)


@lru_cache(maxsize=8)
def words_of(text: str) -> tuple[Word, ...]:
    """Letter runs (with inner apostrophes: "don't") between digits, punctuation and spaces; a word
    glued together from runs of several scripts is one word that knows its runs."""
    words: list[Word] = []
    for match in _WORD.finditer(text):
        word = match.group()
        if word.isascii():
            words.append(Word(word, match.start(), match.end(), _LATIN, (len(word),)))
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
        words.append(Word(word, match.start(), match.end(), tuple(scripts), tuple(lengths)))
    return tuple(words)
