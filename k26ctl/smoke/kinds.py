"""Prompt kinds and the detector thresholds that go with them.

Code, tables, JSON and ASCII art legitimately repeat and contain long symbol runs; prose does not.
A suite names the kind of each prompt; when nothing is known the kind is guessed from the text.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

from k26ctl.smoke.textstats import ASCII_ALNUM, ASCII_DIGITS, ascii_count, cjk_ratio, weighted_len

KINDS = ("prose", "poem", "list", "code", "table", "json", "cjk", "math", "art", "reasoning", "short")


@dataclass(frozen=True)
class KindProfile:
    name: str
    run_letter: int = 14  # same letter, digit or punctuation mark in a row ("!!!!!" in a sentence is fine)
    run_rule: int = 48  # '-', '=', '_', ':', '*', '#', '~', '.', '|', ... (separators, rules, art)
    run_space: int = 40  # spaces or tabs in a row
    run_newline: int = 8
    loop_redundant: float = 40.0  # weighted characters repeated after the first copy of a unit
    loop_copies: float = 3.0
    tail_loop_redundant: float = 10.0  # same, for a loop that runs until the text ends
    tail_loop_copies: float = 3.0
    loop_share: float = 0.3  # a loop making up this share of a short text is degenerate too
    tail_repeat_count: int = 2  # the text's last words already appeared this many times before
    # (lists repeat their item template endlessly, so the list kind switches this check off)
    ngram_coverage: float = 0.5  # share of the tail window made of character n-grams seen before
    tail_compression: float = 3.2
    check_gibberish: bool = True
    check_content: bool = True  # letters must make up a fair share of the visible text
    restatement: float = 0.88  # the last sentence re-says the one before it this closely (1.0 = off)
    check_enumeration_restart: bool = True  # a numbered answer starting over from its first step
    # structured text (code, tables) repeats by design: its repetition counts only while the text is
    # still repeating at its end, not when it closed with something new ("};", "</table>")
    repetition_needs_open_end: bool = False


_PROSE = KindProfile("prose")
_STRUCTURED = KindProfile(
    "code",
    run_letter=32,
    run_rule=200,
    run_space=120,
    run_newline=12,
    loop_redundant=160.0,
    loop_copies=4.0,
    tail_loop_redundant=40.0,
    tail_loop_copies=5.0,
    loop_share=0.6,
    tail_repeat_count=1_000_000,
    ngram_coverage=0.85,
    tail_compression=5.5,
    check_gibberish=False,
    check_content=False,
    restatement=1.01,
    check_enumeration_restart=False,
    repetition_needs_open_end=True,
)

PROFILES: dict[str, KindProfile] = {
    "prose": _PROSE,
    "short": replace(_PROSE, name="short"),
    "reasoning": replace(
        _PROSE, name="reasoning", loop_redundant=60.0, ngram_coverage=0.6, tail_repeat_count=3
    ),
    "poem": replace(
        _PROSE,
        name="poem",
        loop_redundant=80.0,
        ngram_coverage=0.65,
        tail_compression=3.8,
        tail_repeat_count=4,
        restatement=1.01,  # refrains and parallel lines
    ),
    "list": replace(
        _PROSE,
        name="list",
        run_rule=80,
        loop_redundant=80.0,
        ngram_coverage=0.7,
        tail_compression=4.5,
        tail_repeat_count=1_000_000,
        restatement=1.01,  # list items share their template
    ),
    "cjk": replace(_PROSE, name="cjk", check_gibberish=False),
    "code": _STRUCTURED,
    "table": replace(_STRUCTURED, name="table"),
    "json": replace(_STRUCTURED, name="json"),
    "math": replace(_STRUCTURED, name="math", ngram_coverage=0.7),
    "art": replace(_STRUCTURED, name="art", run_letter=64, tail_compression=12.0),
}

_CODE_LINE = re.compile(
    r"^\s*(def |class |import |from \S+ import|return\b|function\b|const |let |var |#include|for\s*\(|"
    r"if\s*\(|while\s*\(|public |private |fn |}|{|.*[;{]\s*$|.*\)\s*:\s*$"
    # Python blocks, assignments, HTML/XML tags, YAML keys, log lines
    r"|(?:for|while|if|elif|else|try|except|finally|with|async|raise|pass|yield|break|continue)\b.*"
    r"|[A-Za-z_][\w.\[\]'\"]*\s*(?:[-+*/|&%]?=|:=)(?!=)\s*\S"
    r"|[A-Za-z_][\w.]*\(.*\)\s*;?\s*$"  # a bare call statement
    r"|['\"][^'\"]*['\"]\s*[,)]?\s*(?:#.*)?$"  # a row of string literals
    r"|\S.*\s#\s.*$"  # code followed by a comment
    r"|\.\. [\w|]|:\w+:(?:\s|$)|>>> |\$ \S"  # reStructuredText directives, prompts
    r"|assert\b|lambda\b|[)\]}]|.*[(\[{]\s*$"  # assertions, lines closing or opening brackets
    r"|</?[A-Za-z][\w:-]*(?:\s[^<>]*)?/?>"
    r"|-?\s*[a-z_][\w.-]*:(?:\s+\S.*)?$"
    r"|\[?\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}|\[?(?:INFO|WARN|WARNING|ERROR|DEBUG|TRACE)\b)"
)
# list items, and the headings and bold labels of sectioned answers, which repeat their template too
_LIST_LINE = re.compile(
    r"^\s*(\d+[.):]|[-*+•]|step \d+[.):]?|[a-z][.)]|#{1,6}|\*\*[^*\n]+\*\*)\s", re.IGNORECASE
)
_TABLE_LINE = re.compile(
    r"^\s*[|\u2502\u2503\u250c\u251c\u2514\u2554\u2560\u255a+].*[|\u2502\u2503\u2510\u2524\u2518\u2557\u2563\u255d+]\s*$"
)


# Characters are counted by deleting the others (one C pass, no list of matches).
_BLANKS = re.compile(r"\s+")
_NOT_ALNUM = re.compile(r"[\W_]+")
_NOT_LETTER = re.compile(r"[\W\d_]+")
_NOT_DIGIT = re.compile(r"\D+")


def guess_kind(text: str) -> str:
    """The most likely kind of a text, from its structure alone."""
    stripped = text.strip()
    if not stripped:
        return "short"
    lines = [line for line in stripped.splitlines() if line.strip()]
    visible = "".join(stripped.split())  # without whitespace: str.split's is re's \s
    if stripped.startswith(("{", "[", "```json")) and '":' in stripped:
        return "json"
    if "```" in stripped or (len(lines) >= 3 and _mostly_code_lines(lines)):
        return "code"
    if sum(bool(_TABLE_LINE.match(x)) for x in lines) >= 2:
        return "table"
    if len(lines) >= 4 and _few_alnum(visible, 0.2 * len(visible)):
        return "art"
    if len(lines) >= 4 and _mostly_data_lines(stripped, lines):
        return "table"  # rows of numbers, hex dumps, CSV of figures
    if stripped.count("\\") >= 4 and stripped.count("{") >= 2:
        return "math"
    if cjk_ratio(stripped) >= 0.3:
        return "poem" if _looks_like_verse(lines) else "cjk"
    if len(lines) >= 3 and sum(bool(_LIST_LINE.match(x)) for x in lines) >= 3:
        return "list"
    if _looks_like_verse(lines):
        return "poem"
    if len(visible) <= 40:
        return "short"
    return "prose"


def _mostly_code_lines(lines: list[str]) -> bool:
    """At least 40 % of the lines look like code. The lines are tried in order until the share is
    reached or can no longer be (the code pattern is long; prose rarely needs more than 60 % of them)."""
    needed = 0.4 * len(lines)
    found = 0
    for done, line in enumerate(lines, start=1):
        if _CODE_LINE.match(line):
            found += 1
            if found >= needed:
                return True
        elif found + len(lines) - done < needed:
            return False
    return False


def _few_alnum(visible: str, limit: float) -> bool:
    """Fewer than `limit` letters and digits. The ASCII ones alone are counted first (in C): when they
    reach the limit, the Unicode-aware count is not needed (most texts)."""
    if ascii_count(visible, ASCII_ALNUM) >= limit:
        return False
    return len(_NOT_ALNUM.sub("", visible)) < limit


def _mostly_data_lines(text: str, lines: list[str]) -> bool:
    """At least 60 % of the lines are data lines. Each has two digits or more, so a text with fewer
    digits than that in all is answered without looking at its lines (most prose)."""
    needed = 0.6 * len(lines)
    digits_needed = 2 * math.ceil(needed)
    if digits_needed > _digits_at_most(text) or digits_needed > len(_NOT_DIGIT.sub("", text)):
        return False
    return sum(_is_data_line(x) for x in lines) >= needed


def _digits_at_most(text: str) -> int:
    """An upper bound of the text's decimal digits, counted in C: its ASCII digits plus every character
    beyond ASCII (each takes two or more UTF-8 bytes, so there are at most len(bytes) - len(text))."""
    beyond_ascii = len(text.encode("utf-8", "surrogatepass")) - len(text)
    return ascii_count(text, ASCII_DIGITS) + beyond_ascii


def _is_data_line(line: str) -> bool:
    """Mostly digits and separators: letters are under a fifth of the visible characters."""
    visible = _BLANKS.sub("", line)
    if len(visible) < 4:
        return False
    letters = len(_NOT_LETTER.sub("", visible))
    digits = len(_NOT_DIGIT.sub("", visible))
    return digits >= 2 and letters < 0.2 * len(visible)


def _looks_like_verse(lines: list[str]) -> bool:
    """Four or more short lines of words, most of them not ending a sentence: songs and poems, whose
    refrains legitimately come back (a line-per-item loop has one- or two-word lines, or far more lines)."""
    if len(lines) < 4:
        return False
    lengths = sorted(weighted_len(line.strip()) for line in lines)  # a CJK character counts twice
    median = lengths[len(lengths) // 2]
    if not 10 <= median <= 70:
        return False  # (the other two counts are needed only for lines of verse length)
    open_ended = sum(not line.rstrip().endswith((".", "!", "?", ":")) for line in lines)
    if open_ended < len(lines) / 2:
        return False
    return len({line.strip().lower() for line in lines}) >= len(lines) / 2


_LENIENT_ORDER = (
    "short",
    "prose",
    "cjk",
    "reasoning",
    "poem",
    "list",
    "math",
    "json",
    "table",
    "code",
    "art",
)
_STRUCTURED_KINDS = ("code", "table", "json", "art", "math")


def profile_for(text: str, kind: str | None) -> KindProfile:
    """The declared kind wins, unless the text is visibly structured (a prose prompt answered with a
    table or a code block is still a table or a code block)."""
    guessed = guess_kind(text)
    if kind is None:
        return PROFILES[guessed]
    declared = kind if kind in PROFILES else "prose"
    more_lenient = _LENIENT_ORDER.index(guessed) > _LENIENT_ORDER.index(declared)
    if guessed in _STRUCTURED_KINDS and more_lenient:
        return PROFILES[guessed]
    return PROFILES[declared]
