"""Degenerate-output detectors: pure functions from text to named findings.

Each detector returns zero or more `Finding`s with a score, the threshold it was compared with, and
the offending span, so a report can show *what* is wrong and *where*. `score_text` runs them all with
thresholds chosen by the prompt's kind and decides whether the text is degenerate.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import regex

from k26ctl.smoke import lexicon
from k26ctl.smoke.finding import Finding
from k26ctl.smoke.jsonkeys import detect_repeated_key
from k26ctl.smoke.kinds import KindProfile, profile_for
from k26ctl.smoke.restarts import enumeration_restart, final_restatement, paragraph_restart
from k26ctl.smoke.shortloops import detect_line_loop, detect_short_loop, detect_word_loop
from k26ctl.smoke.templatemarks import (
    detect_end_markers,
    detect_invented_turn,
    detect_partial_tokens,
    detect_role_opening,
)
from k26ctl.smoke.textstats import (
    ASCII_ALNUM,
    INVISIBLE,
    LINK,
    ascii_count,
    char_runs,
    compression_ratio,
    ends_in_repetition,
    may_hold_link,
    novel_word_share,
    repeated_ngram_coverage,
    script_of,
    tandem_repeats,
    visible,
    weighted_len,
)
from k26ctl.smoke.tokensoup import detect_glued_tokens, detect_short_gibberish, detect_stray_cjk
from k26ctl.smoke.wordsignals import (
    blank_markup,
    detect_non_words,
    detect_script_mix,
    detect_stutter,
    detect_tokenizer_leak,
)
from k26ctl.smoke.wordsignals import preload as _preload_word_signals

# Longest stretch analysed by the O(n * period) loop finder; loops show in any window this size.
_ANALYSIS_CHARS = 6000
_TAIL_WINDOW = 400
_RULE_CHARS = frozenset("-=_*~#.:+|/\\<>^`'\",;()[]{}" + "".join(chr(c) for c in range(0x2500, 0x2580)))
_RULE_CHARS_OR_BLANK = _RULE_CHARS | {" "}
# A line made only of one rule character is a heading underline, a separator or a box edge.
_RULE_LINE_MAX = 240


@dataclass(frozen=True)
class TextVerdict:
    degenerate: bool
    findings: list[Finding] = field(default_factory=list)
    kind: str = "prose"

    @property
    def reasons(self) -> list[str]:
        return [f.reason() for f in self.findings if f.severity == "fail"]

    def to_json(self) -> dict[str, Any]:
        return {
            "degenerate": self.degenerate,
            "kind": self.kind,
            "reasons": self.reasons,
            "findings": [f.to_json() for f in self.findings],
        }


def _excerpt(text: str, start: int, end: int, limit: int = 60) -> str:
    piece = text[start:end]
    if len(piece) > limit:
        piece = piece[: limit - 3] + "..."
    return piece


_SOMETHING_VISIBLE = re.compile("[^\\s" + re.escape("".join(sorted(INVISIBLE))) + "]")


def _visible(text: str) -> str:
    return visible(text)


# ---- detectors ------------------------------------------------------------------------------------


def detect_empty(text: str, prompt: str | None = None) -> list[Finding]:
    """Nothing visible at all (zero-width characters and whitespace do not count as an answer)."""
    if _SOMETHING_VISIBLE.search(text):
        return []
    return [Finding("empty", 1.0, 1.0, (0, len(text)), _excerpt(text, 0, len(text)), "no visible text")]


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
                    _excerpt(text, run.start, run.end),
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


_LAYOUT_LINE = re.compile(r"(?m)^[ \t]*([-=_*~#.:+^`'\u2500-\u257f])\1{4,}[ \t]*$")
# What every such line holds; led by its character class, so the engine skips to candidates.
_LAYOUT_RUN = re.compile(r"([-=_*~#.:+^`'\u2500-\u257f])\1{4}")


def _blank_layout(text: str) -> str:
    """Underlines, separators and box edges made of one character become blanks of the same length:
    repeated layout is not repeated text."""
    if not _LAYOUT_RUN.search(text):
        return text  # no five equal layout characters in a row anywhere: no such line
    return _LAYOUT_LINE.sub(lambda m: " " * len(m.group()), text)


def _analysis_window(text: str) -> tuple[str, int]:
    if len(text) <= _ANALYSIS_CHARS:
        return text, 0
    return text[-_ANALYSIS_CHARS:], len(text) - _ANALYSIS_CHARS


def detect_loops(text: str, profile: KindProfile, finish_reason: str | None = None) -> list[Finding]:
    """A phrase, token or structure repeated back to back (character units, so CJK loops count).

    A long loop anywhere is degenerate; a shorter one is degenerate when the text ends inside it,
    because a healthy model leaves a refrain while a broken one never does. Ending inside a loop at
    the token limit gets its own name: the generation was cut while looping.
    """
    window, offset = _analysis_window(text)
    # A loop may stop a couple of characters before the end (a final period, a newline); in code and
    # tables those characters are a closing bracket, and a loop that was closed is a block.
    tail_gap = 0 if profile.repetition_needs_open_end else 3
    window_end = len(window.rstrip()) if profile.repetition_needs_open_end else len(window)
    best: dict[str, Finding] = {}
    total = functools.cache(functools.partial(weighted_len, text))  # measured only if a loop needs it
    still_repeating = not profile.repetition_needs_open_end or ends_in_repetition(window)
    for rep in tandem_repeats(window):
        stripped_unit = rep.unit.strip()
        if not stripped_unit:
            continue  # whitespace-only units are the char-run detector's business
        redundant = weighted_len(window[rep.start + rep.period : rep.end])
        copies = rep.copies
        at_tail = rep.end >= window_end - tail_gap
        start, end = rep.start + offset, rep.end + offset
        unit_shown = rep.unit.replace("\n", "\\n")
        if not at_tail and not still_repeating:
            continue  # code and tables repeat blocks; a loop the text closed is a block
        if redundant >= profile.loop_redundant and copies >= profile.loop_copies:
            name = "loop"
            threshold = profile.loop_redundant
        elif at_tail and redundant >= profile.tail_loop_redundant and copies >= profile.tail_loop_copies:
            name = "cut_in_loop" if finish_reason == "length" else "tail_loop"
            threshold = profile.tail_loop_redundant
        elif redundant >= 6 and copies >= 4 and redundant >= profile.loop_share * total():
            name = "loop"
            threshold = profile.loop_share * total()
        elif copies >= 2.5 and _whole_answer_unit(window, rep.start, rep.end, stripped_unit):
            name = "loop"  # the whole answer is one unit said three times ("foss foss foss")
            threshold = 2.5
        else:
            continue
        if at_tail and finish_reason == "length":
            name = "cut_in_loop"
        message = f"{unit_shown[:40]!r} repeated {copies:.1f} times"
        if name == "cut_in_loop":
            message += ", generation stopped at the token limit inside the loop"
        elif name == "tail_loop":
            message += " until the end of the text"
        finding = Finding(name, redundant, threshold, (start, end), _excerpt(text, start, end), message)
        previous = best.get(name)
        if previous is None or finding.score > previous.score:
            best[name] = finding
    return list(best.values())


def _whole_answer_unit(text: str, start: int, end: int, unit: str) -> bool:
    """A unit of some weight ("foss", not "ha") with nothing but punctuation and blanks (a trailing
    "..." or ".") outside text[start:end]."""
    outside = text[:start] + text[end:]
    has_content = weighted_len(unit) >= 4 and any(ch.isalnum() for ch in unit)
    return has_content and not any(ch.isalnum() for ch in outside)


_TAIL_PROBE = 20
_CJK_TAIL_PROBE = 16
_SENTENCE_END = tuple(".!?\u3002\uff01\uff1f\u2026\"'\u201d\u2019)")


def detect_tail_repeat(text: str, profile: KindProfile, finish_reason: str | None = None) -> list[Finding]:
    """The text ends with words it has already written several times: a loop with small variations
    between the copies (a separator that changes, a paraphrase) that exact period finding misses.
    Whitespace is normalised so a line break instead of a space does not hide the repeat."""
    flat = _single_spaced(_blank_urls(text))
    probe_len = _TAIL_PROBE
    if weighted_len(flat[-probe_len:]) > 1.4 * probe_len:
        probe_len = _CJK_TAIL_PROBE  # CJK: fewer characters carry as much text
    if len(flat) < 4 * probe_len:
        return []
    probe = flat[-probe_len:]
    if len(set(probe.strip())) <= 2:
        return []  # a single-character run: the run detector owns it
    if sum(ch.isalpha() for ch in probe) < 0.4 * len(probe):
        return []  # dates, version numbers and figures recur in healthy text
    earlier = 0
    pos = flat.find(probe)
    while 0 <= pos < len(flat) - probe_len:
        earlier += 1
        pos = flat.find(probe, pos + 1)
    # A text that stops on a finished sentence by itself may close several paragraphs the same way
    # ("..., then click Save."); a looping generation is cut off mid-phrase or at the token limit.
    ended_cleanly = flat.endswith(_SENTENCE_END) and finish_reason != "length"
    needed = profile.tail_repeat_count * (2 if ended_cleanly else 1)
    if earlier < needed:
        return []
    # Parallel clauses or list lines each saying something new ("shall not copy", "shall not modify",
    # "the parser module is ...", "the lexer module is ...") are not a loop; a loop adds no new word.
    # The last copy is what lies between the probe's last two occurrences.
    last_copy = flat.rfind(probe, 0, len(flat) - probe_len) + probe_len
    if finish_reason != "length" and novel_word_share(flat, last_copy) > 0:
        return []
    name = "cut_in_loop" if finish_reason == "length" else "tail_repeat"
    first = _find_loosely(text, probe)
    return [
        Finding(
            name,
            float(earlier),
            float(profile.tail_repeat_count),
            (first, len(text)),
            _excerpt(text, first, len(text)),
            f"the text ends with {probe.strip()!r}, already written {earlier} times before",
        )
    ]


def detect_restart(text: str, profile: KindProfile, finish_reason: str | None = None) -> list[Finding]:
    """Starting over with small changes, which exact loop finders miss: the text ends by re-stating
    its previous sentence (a word changed, or cut off part-way through the copy), or a numbered answer
    goes back to its first step and says the same steps again in other words."""
    findings: list[Finding] = []
    tail = text[-2000:]
    base = len(text) - len(tail)
    # Parallel sentences that each finish ("shall not copy ...", "shall not modify ...") are style; a
    # finished sentence counts only as an exact copy, a near copy only when the text stops inside it.
    finished = tail.rstrip().endswith(_SENTENCE_END) and finish_reason != "length"
    needed = max(0.999 if finished else 0.0, profile.restatement)
    # (no similarity exceeds 1: kinds whose threshold is above it never compare the sentences)
    again = final_restatement(tail, at_least=needed) if needed <= 1.0 else None
    if again is not None:  # (at least `needed` alike: final_restatement returns None below it)
        start = base + again.previous_start
        findings.append(
            Finding(
                "cut_in_loop" if finish_reason == "length" else "tail_repeat",
                round(again.similarity, 3),
                needed,
                (start, len(text)),
                _excerpt(text, start, len(text)),
                f"the last sentence re-states the one before it ({again.similarity:.0%} alike over "
                f"{again.units} words)",
            )
        )
    again_paragraph = (
        paragraph_restart(tail, at_least=0.9 if finished else _CUT_RESTART)
        if profile.restatement <= 1.0
        else None
    )
    # a paragraph re-said right after itself, or an answer cut off while starting over in other words
    # (a chorus coming back after a verse is neither)
    if again_paragraph is not None and (
        (again_paragraph.back_to_back and again_paragraph.similarity >= 0.9)
        or (not finished and again_paragraph.cut_short and again_paragraph.similarity >= _CUT_RESTART)
    ):
        start = base + again_paragraph.earlier_start
        findings.append(
            Finding(
                "answer_restart",
                round(again_paragraph.similarity, 3),
                0.9 if finished else _CUT_RESTART,
                (start, len(text)),
                _excerpt(text, base + again_paragraph.start, len(text)),
                f"the last paragraph starts the answer over ({again_paragraph.similarity:.0%} alike to "
                "an earlier one)",
            )
        )
    if profile.check_enumeration_restart:
        restart = enumeration_restart(text[: _ANALYSIS_CHARS * 2])
        if restart is not None:
            findings.append(
                Finding(
                    "answer_restart",
                    float(restart.matched),
                    2.0,
                    (restart.start, len(text)),
                    _excerpt(text, restart.start, len(text)),
                    f"the numbered answer starts again at 1 after reaching {restart.reached}; "
                    f"{restart.matched} of {restart.compared} restarted steps repeat the earlier ones",
                )
            )
    return findings


_CUT_RESTART = 0.6


def _blank_urls(text: str) -> str:
    if not may_hold_link(text):
        return text
    return LINK.sub(lambda m: " " * len(m.group()), text)


def _single_spaced(text: str) -> str:
    """Every run of whitespace one space, none at the end (re.sub(r"\\s+", " ", text).rstrip()), by
    str.split and join in C: str.split's whitespace is re's \\s."""
    words = " ".join(text.split())
    return " " + words if words and text[0].isspace() else words


def _find_loosely(text: str, flat_probe: str) -> int:
    """Index in `text` of the first occurrence of a whitespace-normalised probe."""
    pattern = r"\s+".join(re.escape(part) for part in flat_probe.split(" ") if part)
    match = re.search(pattern, text)
    return match.start() if match else 0


def detect_repetition(text: str, profile: KindProfile, finish_reason: str | None = None) -> list[Finding]:
    """Late collapse measured two ways over the tail window: repeated character n-grams (catches
    near-loops with small variations) and the zlib compression ratio (what Whisper uses, but on the
    tail only, since a whole-text ratio hides a collapse after a long healthy start)."""
    findings: list[Finding] = []
    window, offset = _analysis_window(_blank_layout(text))
    if len(window) < 120 and weighted_len(window) < 120:  # (a character weighs 1 or more)
        return findings
    if profile.repetition_needs_open_end and not ends_in_repetition(window):
        return findings
    cjk = weighted_len(window[-200:]) > 1.4 * len(window[-200:])
    n = 8 if cjk else 20
    tail_start = max(0, len(window) - _TAIL_WINDOW)
    # Parallel clauses ("shall not copy ...", "shall not modify ...") and templated sections share long
    # n-grams yet each adds a word; a loop with small variations adds none (exact loops are the loop
    # finder's), unless the generation was cut at the token limit while repeating itself.
    coverage, first = repeated_ngram_coverage(window, n, tail_start)
    novel = 0.0 if cjk else novel_word_share(window, max(first, tail_start))
    recombines = novel < _NOVEL_WORDS or finish_reason == "length"
    if coverage >= profile.ngram_coverage and recombines:
        start = offset + (first if first >= 0 else tail_start)
        findings.append(
            Finding(
                "repetition",
                round(coverage, 3),
                profile.ngram_coverage,
                (start, len(text)),
                _excerpt(text, start, len(text)),
                f"{coverage:.0%} of the last {len(window) - tail_start} characters repeat earlier text",
            )
        )
    tail = window[tail_start:]
    if len(tail.encode("utf-8")) >= 200:
        ratio = compression_ratio(tail)
        if ratio >= profile.tail_compression and (ratio >= 2 * profile.tail_compression or recombines):
            start = offset + tail_start
            findings.append(
                Finding(
                    "tail_compression",
                    round(ratio, 2),
                    profile.tail_compression,
                    (start, len(text)),
                    _excerpt(text, start, len(text)),
                    f"the last {len(tail)} characters compress {ratio:.1f}x",
                )
            )
    return findings


_NOVEL_WORDS = 0.04


# Short English words; anything else of one or two letters in running prose is a fragment.
def _word_set(*lines: str) -> frozenset[str]:
    return frozenset(re.findall(r"[a-z]+", " ".join(lines)))


_SHORT_WORDS = _word_set(
    "a i o am an as at be by do go he hi if in is it me my no of oh ok on or so to up us we ye ah eh",
    "ha mr ms dr st vs id tv uk ai ad pm km cm mm kg ml ex",
)
# Abbreviations ("e.g.", "U.S.") and one-letter labels ("Q:", "A)", "B.") are not word fragments.
# Written as: a letter, then per alternative what the original three checked around it
# (r"\b(?:[A-Za-z]\.){2,}|\b[A-Z]\.(?=\s+[A-Z])|(?<![\w.])[A-Z][:.)](?=\s)"): a pattern that starts with a
# character class lets the engine skip to the letters instead of trying the look-behinds everywhere,
# and every alternative goes on with one of ".:)", so a letter followed by anything else fails at once.
_ABBREVIATION = re.compile(
    r"[A-Za-z](?=[.:)])(?:(?<!\w[A-Za-z])\.(?:[A-Za-z]\.)+"
    r"|(?<=[A-Z])(?<!\w[A-Z])\.(?=\s+[A-Z])"
    r"|(?<=[A-Z])(?<![\w.][A-Z])[:.)](?=\s))"
)
# Letters glued to a number ("500g", "3x", "10ml") are units, not words.
_VOWEL = re.compile("[aeiouyAEIOUY]")
_TRIPLED = re.compile(r"([a-z])\1\1")
# Latin words not glued to a letter or digit before them, once written with a leading look-behind
# (r"(?<![0-9A-Za-z])[A-Za-z]+(?:['\u2019][A-Za-z]+)?"): led by their first letter, so that the engine
# skips to letters; the look-behind after that letter checks the character before it.
_LATIN_WORD = re.compile(r"[A-Za-z](?<![0-9A-Za-z][A-Za-z])[A-Za-z]*(?:['\u2019][A-Za-z]+)?")


def detect_gibberish(text: str, profile: KindProfile) -> list[Finding]:
    """Character-level decay in English prose: stray one- and two-letter fragments, vowel-less words and
    letters tripled inside words. It runs only when the text is English (its function words are the
    most frequent), so an answer in French or German is not mistaken for gibberish; words that are no
    words in any language are `wordsignals.detect_non_words`'s."""
    if not profile.check_gibberish:
        return []
    cleaned = _ABBREVIATION.sub(lambda m: " " * len(m.group()), blank_markup(text))
    words = _LATIN_WORD.findall(cleaned)
    if len(words) < 20:
        return []
    lowered = [word.lower() for word in words]
    if lexicon.guess_language(lowered, "Latin")[0] != "en":
        return []  # a non-English text's short words are not fragments of English words
    # A word's lower-cased letters are also in the lower-cased text (ASCII letters change one by one),
    # so a text without any tripled letter spares every word that search.
    any_tripled = _TRIPLED.search(cleaned.lower()) is not None
    odd = 0
    first_odd = -1
    # the same matches again, for the positions of the few words that need them (found once, and only
    # when one does: most texts have no odd word and no short word outside the list)
    matches: list[re.Match[str]] = []
    for i, word in enumerate(words):
        if len(word) <= 2:  # a stray fragment?
            if (lowered[i] in _SHORT_WORDS or word.isupper()) and (len(word) != 1 or word in "aAI"):
                continue  # a short English word, or an acronym
            matches = matches or list(_LATIN_WORD.finditer(cleaned))
            if not _stands_alone(cleaned, matches[i].start(), matches[i].end()):
                continue
        elif (_VOWEL.search(word) or word.isupper()) and not (any_tripled and _TRIPLED.search(lowered[i])):
            continue  # word-shaped: a vowel (or an acronym), and no letter tripled
        odd += 1
        if first_odd < 0:
            matches = matches or list(_LATIN_WORD.finditer(cleaned))
            first_odd = matches[i].start()
    findings: list[Finding] = []
    start = max(first_odd, 0)
    share = odd / len(words)
    if odd >= 4 and share >= _FRAGMENT_SHARE:
        findings.append(
            Finding(
                "gibberish",
                round(share, 3),
                _FRAGMENT_SHARE,
                (start, len(text)),
                _excerpt(text, start, len(text)),
                f"{odd} of {len(words)} words are fragments or not word-shaped",
            )
        )
    return findings


_FRAGMENT_SHARE = 0.12
_WORD_END = " \t\n,.;:!?-"


def _stands_alone(text: str, start: int, end: int) -> bool:
    """A short word between blanks or sentence punctuation; one glued to code symbols ("-l", "x86",
    "sl = ...('abcde')" leftovers, "\\t") is part of a command or an identifier, not a fragment."""
    before = text[start - 1] if start else " "
    after = text[end] if end < len(text) else " "
    return before.isspace() and after in _WORD_END


_UNKNOWN_SHARE = 0.3


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
                _excerpt(text, 0, len(text)),
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
                _excerpt(text, start, len(text)),
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
                _excerpt(text, start, end),
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
            _excerpt(text, start, end),
            f"{count} U+FFFD replacement character(s)",
        )
    ]


_SPECIAL_TOKEN = re.compile(
    r"<\|[A-Za-z0-9_.:\- ]{1,40}\|>"  # <|im_start|>, <|endoftext|>, <|eot_id|>, Kimi's <|im_user|> ...
    "|<\uff5c[^\uff5c>]{1,40}\uff5c>"  # DeepSeek's full-width bars
    r"|</?s>|<unk>|<pad>|<mask>|<bos>|<eos>|<eod>|<sep>|<cls>"
    r"|<extra_id_\d+>|<end_of_turn>|<start_of_turn>|<\|?reserved_special_token_\d+\|?>"
    r"|\[(?:PAD|UNK|CLS|SEP|MASK|BOS|EOS)\]|\[/?INST\]|<</?SYS>>"
    r"|\[control_\d+\]|<unused\d+>|<\|?reserved_\d+\|?>"  # Mistral v3 and Gemma placeholders
)
# A raw gpt-oss ("harmony") generation is written in its own markup: a text that starts with a channel
# header carries these tokens as format, not as a leak.
_HARMONY_HEADER = re.compile(r"\s*<\|channel\|>\w+(?: to=\S+)?(?:<\|constrain\|>\S+)?<\|message\|>")
_HARMONY_FORMAT = frozenset(
    ("<|channel|>", "<|message|>", "<|end|>", "<|start|>", "<|constrain|>", "<|return|>")
)
# A chat template's role name glued to the answer's last word or sentence ("... people. Iassistant"), or
# alone on its line after the answer: the end-of-turn token was not honoured. (A text that starts with a
# role line is a transcript of the whole template, decoded on purpose.)
_GLUED_ROLE = re.compile(
    r"(?:(?<=[^\W\d_])assistant|(?<=[.!?\u3002\uff01\uff1f])\s?(?:assistant|user|model))(?=[ \t]*(?:\n|$))"
    r"|(?<=\n)(?:assistant|user|model)(?=[ \t]*\n)"
)
_TRANSCRIPT = re.compile(r"\s*(?:system|user)[ \t]*\n")
_ROLE_TURN = re.compile(r"(?:^|\n|</\w+>)\s*(Human|### Instruction|### Human|<\|user\|>|USER):", re.MULTILINE)
# _GLUED_ROLE and _ROLE_TURN start with look-arounds or alternations, which the regex engine tries at
# every position of a multi-megabyte answer; these literal-led patterns find where they can match.
_ROLE_WORD_AT_LINE_END = re.compile(r"(?:assistant|user|model)[ \t]*(?:\n|$)")
_TURN_LABEL = re.compile(r"(?:Human|### Instruction|### Human|<\|user\|>|USER):")


def detect_special_tokens(text: str, prompt: str | None = None) -> list[Finding]:
    """Special tokens that should never reach the text, and an invented next conversation turn."""
    findings: list[Finding] = []
    in_prompt = set(_SPECIAL_TOKEN.findall(prompt)) if prompt else set()
    if _HARMONY_HEADER.match(text):
        in_prompt |= _HARMONY_FORMAT
    matches = [m for m in _SPECIAL_TOKEN.finditer(text) if m.group() not in in_prompt]
    if matches:
        kinds = sorted({m.group() for m in matches})
        start, end = matches[0].start(), matches[-1].end()
        findings.append(
            Finding(
                "special_token",
                float(len(matches)),
                1.0,
                (start, end),
                _excerpt(text, start, end),
                f"{len(matches)} leaked special token(s): {', '.join(kinds[:5])}",
            )
        )
    close = text.find("</think>")
    if close >= 0 and "<think>" not in text[:close] and not (prompt and "</think>" in prompt):
        findings.append(
            Finding(
                "special_token",
                1.0,
                1.0,
                (close, close + 8),
                _excerpt(text, close, close + 8),
                "a stray </think> inside the answer (thinking leaked or the reasoning split failed)",
            )
        )
    glued = _GLUED_ROLE.search(text) if _ROLE_WORD_AT_LINE_END.search(text) else None
    transcript = _TRANSCRIPT.match(text) is not None
    echoed = prompt is not None and glued is not None and glued.group().strip() in prompt
    if glued and text[: glued.start()].strip() and not transcript and not echoed:
        findings.append(
            Finding(
                "role_leak",
                1.0,
                1.0,
                (glued.start(), len(text)),
                _excerpt(text, max(0, glued.start() - 20), len(text)),
                f"the chat template's role name '{glued.group().strip()}' follows the answer (end of turn "
                "not honoured)",
            )
        )
    turn = _ROLE_TURN.search(text) if _TURN_LABEL.search(text) else None
    if (
        turn
        and turn.start() > 0
        and text[: turn.start()].strip()
        and not (prompt and turn.group(1) in prompt)
    ):
        findings.append(
            Finding(
                "role_leak",
                1.0,
                1.0,
                (turn.start(), len(text)),
                _excerpt(text, turn.start(), len(text)),
                f"the answer goes on with an invented '{turn.group(1)}:' turn (end of turn not honoured)",
            )
        )
    return findings


def _normalise(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip().lower()


def _whole_echo(text: str, why: str) -> Finding:
    return Finding("prompt_echo", 1.0, 1.0, (0, len(text)), _excerpt(text, 0, len(text)), why)


def detect_prompt_echo(text: str, prompt: str | None) -> list[Finding]:
    """The answer is the prompt (or mostly the prompt): a template or position bug."""
    if not prompt:
        return []
    answer = _normalise(text)
    question = _normalise(prompt)
    if not answer:
        return []
    # A question said back is no answer, however short; a short statement said back may be one
    # ("Hello" to "Hello").
    if answer == question and question.endswith("?") and " " in question:
        return [_whole_echo(text, "the output is the prompt's question, said back")]
    if len(question) < 12:
        return []
    if answer == question or (
        answer.startswith(question) and len(answer) - len(question) < 0.2 * len(question)
    ):
        return [_whole_echo(text, "the output repeats the prompt and adds almost nothing")]
    if answer.startswith(question):
        return [
            Finding(
                "prompt_echo",
                0.5,
                1.0,
                (0, len(prompt)),
                _excerpt(text, 0, len(prompt)),
                "the output starts by repeating the prompt",
                severity="warn",
            )
        ]
    return []


# A label whose value is missing: "second item:., third item:.," (a template filled with nothing)
_EMPTY_SLOT = re.compile(r"(?<=\w)[ \t]*:[ \t]*[.,;](?=\s|[.,;]|$)")
_SLOT_HINT = re.compile(r":[ \t]*[.,;]")  # what every empty slot holds


def detect_empty_slots(text: str, profile: KindProfile) -> list[Finding]:
    """A broken template: the same frame written again and again with nothing in its slots."""
    if not profile.check_content:
        return []
    if not _SLOT_HINT.search(text):
        return []  # (the look-behind pattern is tried at every position; this one jumps to colons)
    slots = list(_EMPTY_SLOT.finditer(text))
    if len(slots) < 3:
        return []
    start, end = slots[0].start(), slots[-1].end()
    return [
        Finding(
            "empty_slots",
            float(len(slots)),
            3.0,
            (start, end),
            _excerpt(text, max(0, start - 20), end),
            f"{len(slots)} labels with nothing after them (a template left unfilled)",
        )
    ]


_JSON_FENCE = re.compile(r"```(?:json)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)


def detect_broken_json(text: str, profile: KindProfile, finish_reason: str | None = None) -> list[Finding]:
    """A JSON answer whose structure breaks before its end (keys without values, a lost brace).
    A document cut at the token limit fails only at its very end and is not reported, unless the
    model said it was done (finish_reason 'stop', or it closed the code fence around the document);
    JSON followed by prose is fine."""
    if profile.name != "json":
        return []
    stripped = text.strip()
    fence = _JSON_FENCE.match(stripped)
    block = (fence.group(1) if fence else stripped).rstrip()
    base = text.find(block) if block else 0
    if not block.startswith(("{", "[")):
        return []
    try:
        json.loads(block)
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data":
            return []
        truncated = exc.pos >= len(block) or exc.msg.startswith("Unterminated string")
        fence_closed = fence is not None and fence.group().endswith("```") and len(fence.group()) > 6
        if truncated and finish_reason != "stop" and not fence_closed:
            return []
        where = base + exc.pos
        return [
            Finding(
                "broken_json",
                float(exc.pos),
                float(len(block)),
                (where, min(len(text), where + 1)),
                _excerpt(text, max(0, where - 30), where + 30),
                f"JSON breaks at line {exc.lineno} column {exc.colno}: {exc.msg}",
            )
        ]
    return []


Detector = Callable[..., list[Finding]]


# Degeneration shows at the end of a text; analysing more than this tail only costs time (a server that
# ignores max_tokens can send megabytes). Cheap regex checks cover much more: the whole text up to
# twice MAX_SCANNED_EDGE characters (far past any answer within max_tokens), beyond that its head and
# its tail, this many characters of each (a 4 MiB answer took 0.5 s of CPU when they read all of it).
MAX_ANALYSED_CHARS = 24_000
MAX_SCANNED_EDGE = 128_000
_SEAM = "\n\n"  # between the head and the tail of a long text


def _scanned(text: str) -> str:
    """What the cheap whole-text checks read: the text, or its head and tail joined by _SEAM."""
    if len(text) <= 2 * MAX_SCANNED_EDGE:
        return text
    return text[:MAX_SCANNED_EDGE] + _SEAM + text[-MAX_SCANNED_EDGE:]


def _spans_in_text(findings: list[Finding], scanned: str, text: str) -> list[Finding]:
    """Findings on `_scanned(text)`, their spans moved to where they are in `text`."""
    if scanned is text or not findings:
        return findings
    tail_at = MAX_SCANNED_EDGE + len(_SEAM)
    shift = len(text) - MAX_SCANNED_EDGE - tail_at

    def at(i: int) -> int:
        return i if i <= MAX_SCANNED_EDGE else max(i, tail_at) + shift

    return [dataclasses.replace(f, span=(at(f.span[0]), at(f.span[1]))) for f in findings]


def preload() -> None:
    """Read the word lists and imports that `score_text` would otherwise read on first use (about
    0.5 s). A process that forks scoring workers calls it first: the workers share what it read
    (copy-on-write) instead of each paying for it again."""
    _preload_word_signals()


def _long_text_note(length: int) -> str:
    note = f"{length} characters: only the last {MAX_ANALYSED_CHARS} were analysed"
    if length > 2 * MAX_SCANNED_EDGE:
        note += f", and the first and last {MAX_SCANNED_EDGE} checked for tokens and control characters"
    return note


def score_text(
    text: str, prompt: str | None = None, kind: str | None = None, finish_reason: str | None = None
) -> TextVerdict:
    """Run every detector with thresholds for the prompt's kind; degenerate if any finding fails."""
    offset = max(0, len(text) - MAX_ANALYSED_CHARS)
    view = text[offset:]
    profile = profile_for(view, kind)
    findings: list[Finding] = []
    findings += detect_empty(text, prompt)
    if not findings:
        shown: list[Finding] = []
        shown += detect_char_runs(view, profile)
        shown += detect_loops(view, profile, finish_reason)
        shown += detect_tail_repeat(view, profile, finish_reason)
        shown += detect_restart(view, profile, finish_reason)
        shown += detect_repetition(view, profile, finish_reason)
        shown += detect_script_mix(view, profile)
        shown += detect_gibberish(view, profile)
        shown += detect_non_words(view, profile)
        shown += detect_stutter(view, profile)
        shown += detect_low_content(view, profile)
        shown += detect_empty_slots(view, profile)
        shown += detect_broken_json(view, profile, finish_reason)
        shown += detect_line_loop(view, profile)
        shown += detect_short_loop(view, profile)
        shown += detect_word_loop(view, profile)
        shown += detect_glued_tokens(view, profile)
        shown += detect_short_gibberish(view, profile)
        shown += detect_repeated_key(view)
        if offset:
            shown = [dataclasses.replace(f, span=(f.span[0] + offset, f.span[1] + offset)) for f in shown]
            shown.append(
                Finding(
                    "long_text",
                    float(len(text)),
                    float(MAX_ANALYSED_CHARS),
                    (0, offset),
                    "",
                    _long_text_note(len(text)),
                    severity="warn",
                )
            )
        findings += shown
        findings += detect_prompt_echo(text[:20_000], prompt)
    scanned = _scanned(text)
    whole: list[Finding] = []
    whole += detect_invisible(scanned)
    whole += detect_replacement_char(scanned)
    whole += detect_special_tokens(scanned, prompt)
    whole += detect_tokenizer_leak(scanned)
    whole += detect_partial_tokens(scanned, prompt)
    findings += _spans_in_text(whole, scanned, text)
    findings += detect_stray_cjk(view)
    findings += _spans_in_text(detect_role_opening(scanned, prompt), scanned, text)
    findings += _spans_in_text(detect_end_markers(scanned), scanned, text)
    findings += _spans_in_text(detect_invented_turn(scanned, prompt), scanned, text)
    degenerate = any(f.severity == "fail" for f in findings)
    return TextVerdict(degenerate=degenerate, findings=findings, kind=profile.name)
