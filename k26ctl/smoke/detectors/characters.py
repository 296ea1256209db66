"""Family `characters`: what single characters show, whatever the words say.

- empty: nothing visible at all;
- char_run: one character many times in a row ("!!!!!!!!", "GGGG", a wall of newlines);
- symbol_soup / symbol_collapse: letters and digits are a small share of the text, or of its tail;
- invisible_chars: zero-width, bidi and control characters;
- replacement_char: U+FFFD, bytes that were not valid UTF-8.

A new detector belongs here when it judges characters one at a time or by their classes.
"""

from __future__ import annotations

import re
import unicodedata

import regex

from k26ctl.smoke.finding import Finding, excerpt
from k26ctl.smoke.kinds import KindProfile
from k26ctl.smoke.textstats import (
    ASCII_ALNUM,
    INVISIBLE,
    ascii_count,
    char_runs,
    script_of,
    visible,
)

_RULE_CHARS = frozenset("-=_*~#.:+|/\\<>^`'\",;()[]{}" + "".join(chr(c) for c in range(0x2500, 0x2580)))
_RULE_CHARS_OR_BLANK = _RULE_CHARS | {" "}
# A line made only of one rule character is a heading underline, a separator or a box edge.
_RULE_LINE_MAX = 240


_SOMETHING_VISIBLE = re.compile("[^\\s" + re.escape("".join(sorted(INVISIBLE))) + "]")


def _visible(text: str) -> str:
    return visible(text)


# ---- detectors ------------------------------------------------------------------------------------


def detect_empty(text: str, prompt: str | None = None) -> list[Finding]:
    """Nothing visible at all (zero-width characters and whitespace do not count as an answer)."""
    if _SOMETHING_VISIBLE.search(text):
        return []
    return [Finding("empty", 1.0, 1.0, (0, len(text)), excerpt(text, 0, len(text)), "no visible text")]


def detect_char_runs(text: str, profile: KindProfile) -> list[Finding]:
    """One character many times in a row ("!!!!!!!!", "GGGG", a wall of newlines)."""
    findings: list[Finding] = []
    runs = char_runs(text, 5)
    if not runs:
        return findings
    visible_len = max(len(_visible(text)), 1)
    for run in runs:
        ch = run.char
        if ch == "\n":
            limit, what = profile.run_newline, "newlines"
        elif ch in " \t\u3000":
            limit, what = profile.run_space, "spaces"
            if _aligns_text(text, run.start, run.end):
                limit = max(limit, _ALIGNMENT_MAX)
        elif ch in _RULE_CHARS:
            limit, what = profile.run_rule, f"{ch!r}"
            # a rule on its own line, box drawing, or the "+-------+------+" border of a text table
            box = "\u2500" <= ch <= "\u257f"
            if box or _fills_its_line(text, run.start, run.end) or _is_border_line(text, run.start):
                limit = max(limit, _RULE_LINE_MAX)
        else:
            limit, what = profile.run_letter, f"{ch!r}"
        share = run.count / visible_len
        # a heading rule may be half of a short text; a letter or "!" run that big is the answer itself
        dominant = not ch.isspace() and visible_len >= 5 and share >= (0.8 if ch in _RULE_CHARS else 0.4)
        if run.count >= limit or dominant:
            message = f"{run.count} x {what} in a row"
            if dominant and run.count < limit:
                message += f" ({run.count / visible_len:.0%} of the text)"
            findings.append(
                Finding(
                    "char_run",
                    float(run.count),
                    float(limit if not dominant else 5),
                    (run.start, run.end),
                    excerpt(text, run.start, run.end),
                    message,
                )
            )
    return findings


# Spaces that push text to a column (indentation, a right-aligned attribution, a text table) are layout.
_ALIGNMENT_MAX = 160


def _aligns_text(text: str, start: int, end: int) -> bool:
    """The run is followed by words on its own line (symbols alone are not text being aligned)."""
    line_end = text.find("\n", end)
    return any(ch.isalnum() for ch in text[end : len(text) if line_end < 0 else line_end])


def _is_border_line(text: str, pos: int) -> bool:
    line_start = text.rfind("\n", 0, pos) + 1
    line_end = text.find("\n", pos)
    line = text[line_start : len(text) if line_end < 0 else line_end].strip()
    return bool(line) and set(line) <= _RULE_CHARS | {" ", "+"}


def _fills_its_line(text: str, start: int, end: int) -> bool:
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end < 0 else line_end
    return not text[line_start:start].strip() and not text[end:line_end].strip()


# Letters and digits; modifier letters (Arabic tatweel, spacing marks) stretch text but carry no content.
_NOT_CONTENT = regex.compile(r"[^\p{Lu}\p{Ll}\p{Lt}\p{Lo}\p{N}]+")


def detect_low_content(text: str, profile: KindProfile) -> list[Finding]:
    """Mostly symbols, or a healthy start that collapses into symbols (letters vanish in the tail)."""
    if not profile.check_content:
        return []
    # separator and underline lines are layout, not content that collapsed
    kept = [line for line in text.split("\n") if not _is_rule_line(line.strip())]
    visible = _visible("\n".join(kept))
    if len(visible) < 12:
        return []

    def letter_share(chars: str) -> float:
        return len(_NOT_CONTENT.sub("", chars)) / max(len(chars), 1)

    # ASCII letters and digits alone (counted in C) are a lower bound of the share: when they reach
    # 0.3 the Unicode-aware count is not needed
    few_ascii = ascii_count(visible, ASCII_ALNUM) / max(len(visible), 1) < 0.3
    if few_ascii and (whole := letter_share(visible)) < 0.3:
        return [
            Finding(
                "symbol_soup",
                round(whole, 3),
                0.3,
                (0, len(text)),
                excerpt(text, 0, len(text)),
                f"only {whole:.0%} of the visible characters are letters or digits",
            )
        ]
    tail_visible = visible[-40:]
    if len(visible) >= 60 and len(tail_visible) >= 10 and letter_share(tail_visible) < 0.25:
        start = max(0, len(text) - len(text) // 4)
        share = letter_share(tail_visible)
        return [
            Finding(
                "symbol_collapse",
                round(share, 3),
                0.25,
                (start, len(text)),
                excerpt(text, start, len(text)),
                f"the text ends in symbols: {share:.0%} letters in the last 40 visible characters",
            )
        ]
    return []


def _is_rule_line(stripped: str) -> bool:
    """Only rule characters (and blanks); the first character settles most lines."""
    return bool(stripped) and stripped[0] in _RULE_CHARS_OR_BLANK and set(stripped) <= _RULE_CHARS_OR_BLANK


def _invisible_allowed(text: str, i: int) -> bool:
    """ZWJ inside emoji sequences and ZWNJ between Arabic-script letters are ordinary."""
    ch = text[i]
    before = text[i - 1] if i > 0 else ""
    after = text[i + 1] if i + 1 < len(text) else ""
    if ch == "\u200d":
        return (
            bool(before)
            and bool(after)
            and (
                unicodedata.category(before) == "So"
                or unicodedata.category(after) == "So"
                or ord(after) >= 0x1F000
            )
        )
    if ch == "\u200c":
        return script_of(before) in ("Arabic", "Indic") and script_of(after) in ("Arabic", "Indic")
    return False


_HIDDEN = re.compile("[" + re.escape("".join(sorted(INVISIBLE))) + "\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def detect_invisible(text: str) -> list[Finding]:
    """Zero-width, bidi and control characters: output that looks empty or odd but is not."""
    positions = [m.start() for m in _HIDDEN.finditer(text) if not _invisible_allowed(text, m.start())]
    if not positions:
        return []
    count = len(positions)
    share = count / max(len(text.strip()), 1)
    if count >= 3 or share >= 0.05:
        start, end = positions[0], positions[-1] + 1
        names = sorted({f"U+{ord(text[i]):04X}" for i in positions})[:4]
        return [
            Finding(
                "invisible_chars",
                float(count),
                3.0,
                (start, end),
                excerpt(text, start, end),
                f"{count} invisible or control characters ({', '.join(names)})",
            )
        ]
    return []


def detect_replacement_char(text: str) -> list[Finding]:
    """U+FFFD: the engine decoded bytes that are not valid UTF-8 (a split or corrupted token)."""
    count = text.count("\ufffd")
    if not count:
        return []
    start = text.index("\ufffd")
    end = text.rindex("\ufffd") + 1
    return [
        Finding(
            "replacement_char",
            float(count),
            1.0,
            (start, end),
            excerpt(text, start, end),
            f"{count} U+FFFD replacement character(s)",
        )
    ]


_PUNCTUATION_ONLY = re.compile(r"[!-/:-@\[-`{-~…\s]+")


def detect_symbol_lines(text: str, profile: KindProfile, *, min_lines: int) -> list[Finding]:
    """Line after line of stray punctuation ("*", "-**", ",", "<?", "+ '") in prose: fragments of
    markup and numbers scattered one per line. Rules and separators (one character repeated, "---",
    "* * *") and code fences are layout, and code, tables and art are not judged."""
    if not profile.check_content or "\n" not in text:
        return []
    lines = [line.strip() for line in text.split("\n")]
    symbols = [n for n, line in enumerate(lines) if _is_shard(line)]
    if len(symbols) < min_lines or len(symbols) < 0.15 * sum(1 for line in lines if line):
        return []
    start = sum(len(line) + 1 for line in text.split("\n")[: symbols[0]])
    return [
        Finding(
            "symbol_lines",
            float(len(symbols)),
            float(min_lines),
            (start, len(text)),
            excerpt(text, start, len(text)),
            f"{len(symbols)} lines of nothing but stray punctuation",
        )
    ]


# Closing and opening brackets with their separators ("});", "],", "{"), and empty comments ("#", "//",
# "/*", "*/"): the structure of code, one line each.
_CODE_STRUCTURE = re.compile(r"[()\[\]{};,]+|#+|//|/\*+|\*+/")


def _is_shard(line: str) -> bool:
    """Punctuation alone on its line that is no rule and no code structure: one or two characters
    ("*", "+", "**"), or several different ones ("-**", "<?"); "---", "* * *", "});" and code fences
    are layout."""
    if not line or not _PUNCTUATION_ONLY.fullmatch(line) or line.startswith("```"):
        return False
    if _CODE_STRUCTURE.fullmatch(line):
        return False
    return len(line) <= 2 or len(set(line.replace(" ", ""))) > 1


# "!" or "?" glued to a word and followed by a word in lower case: the sentence did not end there.
_MARK_INSIDE_SENTENCE = re.compile(r"(?<=[^\W\d_])[!?]+[ \t]+(?=[a-z])")
_WORD_CHARS = re.compile(r"[^\W\d_]+")


def detect_punctuation_spam(text: str, *, min_marks: int) -> list[Finding]:
    """Exclamation or question marks between the words of one sentence ("How! can! I!!! help! you!"):
    punctuation tokens sampled in place of spaces. One "Wow! that's" is style; a mark after a fifth of
    the words is not."""
    if "!" not in text and "?" not in text:
        return []
    marks = list(_MARK_INSIDE_SENTENCE.finditer(text))
    if len(marks) < min_marks or len(marks) < 0.2 * len(_WORD_CHARS.findall(text)):
        return []
    start, end = marks[0].start(), marks[-1].end()
    return [
        Finding(
            "punctuation_spam",
            float(len(marks)),
            float(min_marks),
            (start, end),
            excerpt(text, max(0, start - 10), end + 10),
            f"{len(marks)} exclamation or question marks inside sentences, between words",
        )
    ]
