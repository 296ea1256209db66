"""Restarts: a model that starts its answer (or its last sentence) over again with small changes.

Exact loop finders see only verbatim copies. A broken decoder often re-states what it just wrote with
a word changed ("I'm not going to ... I'm going to ...") or restarts a numbered answer from its first
step in new words. These helpers compare word sequences and word sets instead of characters.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from difflib import SequenceMatcher

from k26ctl.smoke.textstats import LINK, may_hold_link, wide_count

_SENTENCE = re.compile(r"[^.!?\u3002\uff01\uff1f]+(?:[.!?\u3002\uff01\uff1f]+|$)")
_WORD = re.compile(r"\w+")
_STOP = frozenset(
    re.findall(
        r"\w+",
        "the a an and or but of to in on at by for with from as is are was were be been it its this that "
        "these those he she they we you i his her their our your not no so if then than there which what",
    )
)


@dataclass(frozen=True)
class Restatement:
    """The text's last sentence (`start`..end) re-states the sentence before it (`previous_start`)."""

    previous_start: int
    start: int
    similarity: float
    units: int  # words (or CJK characters) in the shorter of the two


def _units(sentence: str) -> list[str]:
    """Words, or single characters for CJK text (no spaces to split on); links do not count."""
    if may_hold_link(sentence):
        sentence = LINK.sub(" ", sentence)
    wide = wide_count(sentence)
    if wide >= 0.5 * max(len(sentence.strip()), 1):
        return [ch for ch in sentence if ch.isalnum()]
    if sentence.isascii():  # lower-casing ASCII keeps every character and its \w-ness: once for all
        return _WORD.findall(sentence.lower())
    return [w.lower() for w in _WORD.findall(sentence)]


def final_restatement(text: str, min_units: int = 6, at_least: float = 0.0) -> Restatement | None:
    """The last sentence compared with the one before it: whole against whole, and (when the last one
    was cut off) against the same-length opening of the previous one. Returns the better match, or
    None when it is less alike than `at_least`."""
    # the last two sentences that have words (found from the end: earlier ones are never compared)
    spans: list[tuple[int, list[str]]] = []
    for m in reversed(list(_SENTENCE.finditer(text))):
        units = _units(m.group())
        if units:
            spans.append((m.start(), units))
            if len(spans) == 2:
                break
    if len(spans) < 2:
        return None
    (last_start, b), (prev_start, a) = spans
    if min(len(a), len(b)) < min_units:
        return None
    whole = _ratio_if_reaching(a, b, at_least)
    opening = _ratio_if_reaching(a[: len(b)], b, at_least) if len(b) < len(a) else 0.0
    if max(whole, opening) < at_least:
        return None
    return Restatement(prev_start, last_start, max(whole, opening), min(len(a), len(b)))


def _ratio_if_reaching(a: list[str], b: list[str], at_least: float) -> float:
    """SequenceMatcher's ratio of a and b; 0.0 when its cheap upper bounds (lengths, then shared words
    regardless of order) already show it stays below `at_least`, which spares the matching itself."""
    matcher = SequenceMatcher(None, a, b, autojunk=False)
    if at_least > 0 and (matcher.real_quick_ratio() < at_least or matcher.quick_ratio() < at_least):
        return 0.0
    return matcher.ratio()


_NUMBERED = re.compile(
    r"^[ \t>*#-]*(?:(step|part|phase|stage)\s*)?(\d{1,3})\s*[.):\uff0e\u3001]\s*(.*)$", re.I
)


# Every number _NUMBERED can read (1 to 3 digits after a non-digit, then its punctuation), and more.
# An item number of 1-3 digits not preceded by a digit (r"(?<!\d)(\d{1,3})\s*[.):\uff0e\u3001]"), written
# to start with its first digit, so that the engine skips to digits instead of trying the look-behind
# at every position; the look-behind, moved after that digit, checks the character before it.
_ITEM_NUMBER = re.compile(r"(\d(?<!\d\d)\d{0,2})\s*[.):\uff0e\u3001]")


@dataclass(frozen=True)
class EnumerationRestart:
    """A numbered run that went back to 1 and re-said its earlier items (`matched` of `compared`)."""

    start: int  # offset of the restarted first item
    reached: int  # highest number before the restart
    compared: int
    matched: int


def _content_words(item: str) -> set[str]:
    """Content words of an item; character pairs for CJK text."""
    if may_hold_link(item):
        item = LINK.sub(" ", item)
    if wide_count(item) >= 0.5 * max(len(item.strip()), 1):
        chars = [ch for ch in item if ch.isalnum()]
        return {a + b for a, b in itertools.pairwise(chars)}
    return {w for w in (x.lower() for x in _WORD.findall(item)) if len(w) >= 3 and w not in _STOP}


def _jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


def _breaks_run(line: str) -> bool:
    """A heading or a paragraph at the left margin ends a numbered run; indented continuation lines and
    lines without letters (an elision such as ". . .") do not."""
    return not line[:1].isspace() and any(ch.isalpha() for ch in line)


def enumeration_restart(text: str, overlap: float = 0.25) -> EnumerationRestart | None:
    """Numbered lines ("Step 1:", "1.", "2)") whose numbering returns to 1 with no heading or paragraph
    in between (a second list under its own heading is fine), where at least two restarted items share
    a fair part of their words with the same-numbered earlier item."""
    if sum(int(number) == 1 for number in _ITEM_NUMBER.findall(text)) < 2:
        return None  # a restart needs two items numbered 1 (one regex pass instead of a loop over lines)
    label: str | None = None
    first_pass: dict[int, str] = {}
    second_pass: dict[int, str] = {}
    restart_at = -1
    indent = 0
    offset = 0
    for line in text.splitlines(keepends=True):
        here = offset
        offset += len(line)
        bare = line.rstrip("\n")
        if not bare.strip():
            continue
        match = _NUMBERED.match(bare)
        depth = len(bare) - len(bare.lstrip())
        if match and first_pass and depth != indent:
            continue  # a nested list (or its parent level) counts on its own
        if restart_at >= 0:
            if match and (match.group(1) or "").lower() == label:
                second_pass.setdefault(int(match.group(2)), match.group(3))
            continue
        if match is None:
            if _breaks_run(bare) or (first_pass and depth <= indent and any(c.isalpha() for c in bare)):
                label, first_pass = None, {}
            continue
        word, number, body = (match.group(1) or "").lower(), int(match.group(2)), match.group(3)
        reached = max(first_pass, default=0)
        if number == 1 and label == word and reached >= 3:
            restart_at = here
            second_pass[1] = body
        elif number == 1:
            label, first_pass, indent = word, {1: body}, depth
        elif label == word and number > reached:
            first_pass[number] = body
        else:
            label, first_pass = None, {}
    if restart_at < 0:
        return None
    pairs = [(first_pass[k], v) for k, v in second_pass.items() if k in first_pass]
    matched = sum(_jaccard(_content_words(a), _content_words(b)) >= overlap for a, b in pairs)
    if matched >= 2 and matched * 2 >= len(pairs):
        return EnumerationRestart(restart_at, max(first_pass), len(pairs), matched)
    return None


@dataclass(frozen=True)
class ParagraphRestart:
    """The last paragraph (from `start`) re-says an earlier one (from `earlier_start`)."""

    earlier_start: int
    start: int
    similarity: float
    back_to_back: bool
    cut_short: bool  # the last paragraph is shorter than the one it copies (it stopped part-way)


_PARAGRAPH = re.compile(r"[^\n]+(?:\n(?!\s*\n)[^\n]+)*")


def paragraph_restart(text: str, min_words: int = 12, at_least: float = 0.0) -> ParagraphRestart | None:
    """The last paragraph compared with each earlier one of some length (against its opening when
    the last one was cut off); the best match (the first of equals), or None when it is less alike
    than `at_least`. A paragraph whose ratio stays below that cannot be the best one that reaches it,
    so its ratio is computed only when the cheap upper bounds allow it."""
    blocks = [(m.start(), _units(m.group())) for m in _PARAGRAPH.finditer(text)]
    blocks = [(start, words) for start, words in blocks if len(words) >= min_words]
    if len(blocks) < 2:
        return None
    last_start, last = blocks[-1]
    best: ParagraphRestart | None = None
    for i, (start, words) in enumerate(blocks[:-1]):
        ratio = _ratio_if_reaching(words[: len(last)], last, at_least)
        if best is None or ratio > best.similarity:
            best = ParagraphRestart(start, last_start, ratio, i == len(blocks) - 2, len(last) < len(words))
    return best if best is not None and best.similarity >= at_least else None
