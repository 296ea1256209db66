"""Family `loops`: repetition measured over the tail of a text of some length.

- loop / tail_loop / cut_in_loop: a phrase, token or structure repeated back to back;
- tail_repeat: the text ends with words it has already written several times (small variations);
- answer_restart: the answer starts over (its last sentence or paragraph re-says an earlier one, or a
  numbered answer goes back to step 1);
- repetition / tail_compression: repeated character n-grams and the zlib ratio of the tail.

A new detector belongs here when it measures repetition over hundreds of characters; repetition at
the scale of a line or a few words is `shortloops`'.
"""

from __future__ import annotations

import functools
import re
from collections import Counter

from k26ctl.smoke.finding import Finding, excerpt
from k26ctl.smoke.kinds import KindProfile
from k26ctl.smoke.markup import blank_markup
from k26ctl.smoke.restarts import enumeration_restart, final_restatement, paragraph_restart
from k26ctl.smoke.textstats import (
    LINK,
    compression_ratio,
    ends_in_repetition,
    may_hold_link,
    novel_word_share,
    repeated_ngram_coverage,
    tandem_repeats,
    weighted_len,
)

# Longest stretch analysed by the O(n * period) loop finder; loops show in any window this size.
_ANALYSIS_CHARS = 6000
_TAIL_WINDOW = 400


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
        finding = Finding(name, redundant, threshold, (start, end), excerpt(text, start, end), message)
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
            excerpt(text, first, len(text)),
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
                excerpt(text, start, len(text)),
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
                excerpt(text, base + again_paragraph.start, len(text)),
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
                    excerpt(text, restart.start, len(text)),
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
                excerpt(text, start, len(text)),
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
                    excerpt(text, start, len(text)),
                    f"the last {len(tail)} characters compress {ratio:.1f}x",
                )
            )
    return findings


_NOVEL_WORDS = 0.04


_PHRASE_WORDS = 5
_PHRASE_WINDOW = 1500  # characters at the end of the text
_WORD = re.compile(r"[^\W_]+")


def detect_phrase_loop(
    text: str, profile: KindProfile, finish_reason: str | None = None, *, min_copies: int
) -> list[Finding]:
    """One phrase of five words said again and again near the end of a text, with different words
    between the copies ("the correct answer is actually **site** ... the correct answer is actually
    **copy** ..."): a loop that varies its filler, which exact loop finders miss. Poems, lists and
    structured text repeat their lines by design and are not judged; a text that stops on a finished
    sentence by itself needs twice the copies (parallel clauses: "shall not copy the Software except
    as expressly permitted", "shall not modify the Software except as expressly permitted")."""
    if profile.name in ("poem", "list") or profile.repetition_needs_open_end:
        return []
    ended_cleanly = text.rstrip().endswith(_SENTENCE_END) and finish_reason != "length"
    needed = min_copies * (2 if ended_cleanly else 1)
    tail_start = max(0, len(text) - _PHRASE_WINDOW)
    prose = blank_markup(text)  # links and inline code repeat by design (badges, one repository)
    words = [(m.group().lower(), m.start(), m.end()) for m in _WORD.finditer(prose, tail_start)]
    if len(words) < _PHRASE_WORDS * needed:
        return []
    # Every word of a phrase said `needed` times is itself said that often: only runs of five such
    # words can start a copy (in most texts there are none, and no phrase is built).
    counts = Counter(w[0] for w in words)
    frequent = [counts[w[0]] >= needed for w in words]
    starts = [i for i in range(len(words) - _PHRASE_WORDS + 1) if all(frequent[i : i + _PHRASE_WORDS])]
    if len(starts) < needed:
        return []
    copies: dict[tuple[str, ...], list[tuple[int, int]]] = {}  # phrase -> (start, end) of each copy
    for i in starts:
        phrase = tuple(w[0] for w in words[i : i + _PHRASE_WORDS])
        seen = copies.setdefault(phrase, [])
        if not seen or words[i][1] >= seen[-1][1]:  # copies may not overlap ("la la la la la la")
            seen.append((words[i][1], words[i + _PHRASE_WORDS - 1][2]))
    phrase, spans = max(copies.items(), key=lambda kv: len(kv[1]))
    if len(spans) < needed:
        return []
    start = spans[0][0]
    return [
        Finding(
            "phrase_loop",
            float(len(spans)),
            float(needed),
            (start, len(text)),
            excerpt(text, start, len(text)),
            f"the phrase {' '.join(phrase)!r} is said {len(spans)} times in the last "
            f"{len(text) - tail_start} characters",
        )
    ]
