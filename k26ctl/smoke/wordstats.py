"""One pass over a text's words, shared by the word-level detectors.

A word is a maximal run of letters (with combining marks and inner apostrophes). Each word also knows
the scripts it is written in (Unicode script properties from the `regex` module): a word that switches
from Latin to Cyrillic or Telugu part-way is a sign of random vocabulary entries glued together.
`words_of` caches its last results, since several detectors ask about the same text.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

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


@dataclass(frozen=True)
class Word:
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


@lru_cache(maxsize=8)
def words_of(text: str) -> tuple[Word, ...]:
    """Letter runs of one script glued together make one word; apostrophes inside a word keep it whole
    ("don't"). Digits, punctuation and spaces separate words."""
    words: list[Word] = []
    start = end = -1
    scripts: list[str] = []
    lengths: list[int] = []
    for match in _RUN.finditer(text):
        name = match.lastgroup or "Other"
        size = match.end() - match.start()
        if match.start() == end or (
            match.start() == end + 1 and text[end] in "'\u2019" and scripts[-1] == name
        ):
            end = match.end()
            if scripts[-1] != name:
                scripts.append(name)
                lengths.append(size)
            else:
                lengths[-1] += size
            continue
        if start >= 0:
            words.append(Word(text[start:end], start, end, tuple(scripts), tuple(lengths)))
        start, end, scripts, lengths = match.start(), match.end(), [name], [size]
    if start >= 0:
        words.append(Word(text[start:end], start, end, tuple(scripts), tuple(lengths)))
    return tuple(words)
