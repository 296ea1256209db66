"""Family `shortloops`: repetition at the small scale, where the loop finders' weight thresholds do
not reach.

- line_loop: the same line written three times in a row (blank lines between allowed);
- short_loop: a short text that is mostly one unit repeated up to its very end ("Wait, I's... Wait,
  I's... Wa");
- word_loop: a group of two to four words written two and a half times back to back ("Seine River
  Seine River Seine"), and an item doubled inside a comma-separated enumeration ("beta, gamma,
  gamma, delta").

A new detector belongs here when the repeated unit is a line or a few words.
"""

from __future__ import annotations

import itertools
import re
from itertools import compress, count
from operator import eq

from k26ctl.smoke.finding import Finding, excerpt
from k26ctl.smoke.kinds import KindProfile
from k26ctl.smoke.markup import blank_markup
from k26ctl.smoke.textstats import (
    tandem_repeats,
    visible,
    weighted_len,
)
from k26ctl.smoke.wordstats import words_of

# Words people double or triple on purpose ("ha ha ha", "no, no, no", "very, very").
# fmt: off
_CHANTED = frozenset(
    (
        "ha", "he", "hee", "ho", "la", "na", "da", "no", "yes", "so", "very", "bye", "now", "well", "go",
        "come", "knock", "tut", "hip", "chop", "really", "more", "again", "far", "long", "away", "over",
        "round", "and", "many", "much", "oh", "ah", "blah", "yeah", "run", "tick", "tock", "ding", "dong",
        "boom", "bang", "click", "beep", "woof", "meow", "quack", "cha", "rah", "ole", "olé", "bla",
    )
)


_WORD = re.compile(r"[^\W\d_]{2,}")  # letters of words, not the "x" of "0x00"
_LINE_LETTERS = 6  # ... when its words carry this many letters ("}" or "---" three times is layout)


def detect_line_loop(text: str, profile: KindProfile, *, copies: int) -> list[Finding]:
    """The same non-blank line three times in a row: a phrase loop that short lines hide from the
    character loop finder (" Need implement.\\n\\n Need implement.\\n\\n Need implement.")."""
    if "\n" not in text or profile.repetition_needs_open_end:
        return []  # code, tables, JSON and art repeat rows: the loop finders judge them
    lines = text.split("\n")
    stripped = [line.strip() for line in lines]
    ends = list(itertools.accumulate(len(line) + 1 for line in lines))  # offset after each line's "\n"
    kept = [i for i, line in enumerate(stripped) if line]  # blank lines between copies are allowed
    best: tuple[int, int, int, str] | None = None  # copies, start, end, line
    run = 1
    for a, b in itertools.pairwise(kept):
        run = run + 1 if stripped[a] == stripped[b] else 1
        if run < copies or (best is not None and run <= best[0]):
            continue
        line = stripped[b]
        if sum(map(len, _WORD.findall(line))) >= _LINE_LETTERS:
            first = kept[kept.index(b) - run + 1]
            start = ends[first] - len(lines[first]) - 1
            best = (run, start + lines[first].index(line), ends[b] - 1, line)
    if best is None:
        return []
    found, start, end, line = best
    return [
        Finding(
            "line_loop",
            float(found),
            float(copies),
            (start, end),
            excerpt(text, start, end),
            f"the line {line[:40]!r} is written {found} times in a row",
        )
    ]


_SHORT_LOOP_MAX = 400  # characters: longer texts are the weight-based loop finders'
_UNIT_WEIGHT = 6


def detect_short_loop(text: str, profile: KindProfile, *, min_share: float) -> list[Finding]:
    """A short text that ends inside back-to-back copies of one unit, the copies making up half of
    what it shows or more ("When the\\n.\\n\\nThe first\\n\\n.\\n\\nThe first\\n\\n.")."""
    if len(text) > _SHORT_LOOP_MAX or profile.name in ("code", "table", "json", "art"):
        return []
    body = text.rstrip()
    shown = len(visible(body))
    if shown < 12:
        return []
    for rep in tandem_repeats(body):
        unit = rep.unit
        if rep.end < len(body) - 3 or weighted_len(unit.strip()) < _UNIT_WEIGHT:
            continue
        if sum(ch.isalpha() for ch in unit) < 3:
            continue
        share = len(visible(body[rep.start : rep.end])) / shown
        if share >= min_share:
            return [
                Finding(
                    "short_loop",
                    round(share, 3),
                    min_share,
                    (rep.start, rep.end),
                    excerpt(text, rep.start, rep.end),
                    f"{unit.strip()[:40]!r} repeated {rep.copies:.1f} times up to the end "
                    f"({share:.0%} of the text)",
                )
            ]
    return []


def detect_word_loop(text: str, profile: KindProfile) -> list[Finding]:
    """A group of two to four words said two and a half times in a row with only spaces between
    ("Seine River Seine River Seine", "of the of the of"), or one item written twice in a row inside
    a comma-separated enumeration of four or more items ("alpha, beta, gamma, gamma, delta")."""
    if profile.name in ("code", "table", "json", "art", "math"):
        return []
    found = _tandem_words(text) or _doubled_item(text)
    return [found] if found else []


def _tandem_words(text: str) -> Finding | None:
    words = words_of(blank_markup(text))  # (cached: the word-level detectors ask for the same)
    if len(words) < 5:
        return None
    lowered = [w.text.lower() for w in words]
    for size in (2, 3, 4):
        # a group comes back `size` and `2 * size` words later: only there can a loop start
        starts = [
            i
            for i in compress(count(), map(eq, lowered, lowered[size:]))
            if i + 2 * size < len(lowered) and lowered[i + 2 * size] == lowered[i]
        ]
        for i in starts:
            if lowered[i : i + size] != lowered[i + size : i + 2 * size]:
                continue
            group = lowered[i : i + size]
            if len(set(group)) < size or all(word in _CHANTED for word in group):
                continue
            span = words[i : i + 2 * size + 1]
            gaps = [text[a.end : b.start] for a, b in itertools.pairwise(span)]
            if not all(gap.isspace() and "\n" not in gap for gap in gaps):
                continue  # (across lines it is a line loop's or a list's business)
            start, end = span[0].start, span[-1].end
            return Finding(
                "word_loop",
                2.5,
                2.5,
                (start, end),
                excerpt(text, start, end),
                f"the words {' '.join(group)!r} are written two and a half times in a row",
            )
    return None


_ENUMERATION = re.compile(r"[^\W\d_]{3,}(?:, [^\W\d_]{3,}){3,}")


def _doubled_item(text: str) -> Finding | None:
    if text.count(", ") < 3:
        return None
    for match in _ENUMERATION.finditer(text):
        items = match.group().split(", ")
        lowered = [item.lower() for item in items]
        for i in range(len(items) - 1):
            if lowered[i] != lowered[i + 1] or lowered[i] in _CHANTED:
                continue
            if len(set(lowered)) < len(lowered) - 1:
                continue  # a chant or a refrain list repeats more than one item
            start = match.start() + sum(len(item) + 2 for item in items[:i])
            end = start + 2 * len(items[i]) + 2
            return Finding(
                "word_loop",
                2.0,
                2.0,
                (start, end),
                excerpt(text, match.start(), match.end()),
                f"the item {items[i]!r} is written twice in a row in an enumeration",
            )
    return None
