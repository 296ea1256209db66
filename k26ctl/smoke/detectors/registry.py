"""The detector registry: one row per detector, read by `score_text`, the JSON output and the
cross-validation benchmark (benchmarks/detector_cv.py).

A row names the detector, its family (the module it lives in), its function, what part of the text it
reads and which other inputs it takes, its own thresholds (passed to the function as keyword
arguments, with the candidate values the cross-validation may choose from) and the fields of the
prompt kind's profile it reads (those vary by kind; their values are the table in `kinds.PROFILES`).
Rows run in the order written here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from k26ctl.smoke.detectors import characters, loops, scripts, shortloops, structure, template, words
from k26ctl.smoke.finding import Finding

# What a detector reads: `text` the whole text; `view` its last MAX_ANALYSED_CHARS characters (the
# analysis window of the costly detectors); `head` its first PROMPT_ECHO_CHARS characters; `scanned`
# the whole text, or its head and tail when it is very long (the cheap pattern checks).
Reads = Literal["text", "view", "head", "scanned"]
Input = Literal["profile", "prompt", "finish_reason"]


@dataclass(frozen=True)
class Detector:
    name: str  # the name of its findings (the first of `emits`)
    family: str
    function: Callable[..., list[Finding]]
    reads: Reads
    inputs: tuple[Input, ...] = ()  # passed after the text, in this order
    thresholds: Mapping[str, float] = field(default_factory=dict)  # keyword arguments of the function
    # per threshold, the values the cross-validation may choose from, strictest first
    candidates: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    kind_fields: tuple[str, ...] = ()  # the KindProfile fields it reads
    emits: tuple[str, ...] = ()  # every finding name it can give (default: its name)
    gate: bool = False  # when it finds something, the rows reading the answer's words are skipped

    @property
    def findings(self) -> tuple[str, ...]:
        return self.emits or (self.name,)


_LOOP_FIELDS = (
    "loop_redundant",
    "loop_copies",
    "tail_loop_redundant",
    "tail_loop_copies",
    "loop_share",
    "repetition_needs_open_end",
)

DETECTORS: tuple[Detector, ...] = (
    Detector("empty", "characters", characters.detect_empty, "text", gate=True),
    Detector(
        "char_run",
        "characters",
        characters.detect_char_runs,
        "view",
        ("profile",),
        kind_fields=("run_letter", "run_rule", "run_space", "run_newline"),
    ),
    Detector(
        "loop",
        "loops",
        loops.detect_loops,
        "view",
        ("profile", "finish_reason"),
        kind_fields=_LOOP_FIELDS,
        emits=("loop", "tail_loop", "cut_in_loop"),
    ),
    Detector(
        "tail_repeat",
        "loops",
        loops.detect_tail_repeat,
        "view",
        ("profile", "finish_reason"),
        kind_fields=("tail_repeat_count",),
        emits=("tail_repeat", "cut_in_loop"),
    ),
    Detector(
        "answer_restart",
        "loops",
        loops.detect_restart,
        "view",
        ("profile", "finish_reason"),
        kind_fields=("restatement", "check_enumeration_restart"),
        emits=("answer_restart", "tail_repeat", "cut_in_loop"),
    ),
    Detector(
        "repetition",
        "loops",
        loops.detect_repetition,
        "view",
        ("profile", "finish_reason"),
        kind_fields=("ngram_coverage", "tail_compression", "repetition_needs_open_end"),
        emits=("repetition", "tail_compression"),
    ),
    Detector("script_mix", "scripts", scripts.detect_script_mix, "view", ("profile",)),
    Detector(
        "gibberish", "words", words.detect_gibberish, "view", ("profile",), kind_fields=("check_gibberish",)
    ),
    Detector(
        "non_words",
        "words",
        words.detect_non_words,
        "view",
        ("profile",),
        kind_fields=("check_gibberish",),
        emits=("non_words", "word_salad"),
    ),
    Detector(
        "stutter",
        "words",
        words.detect_stutter,
        "view",
        ("profile",),
        # doubled words that fail a text (one doubled function word or pair of them is enough)
        thresholds={"min_events": 2},
        candidates={"min_events": (4, 3, 2)},
    ),
    Detector(
        "symbol_soup",
        "characters",
        characters.detect_low_content,
        "view",
        ("profile",),
        kind_fields=("check_content",),
        emits=("symbol_soup", "symbol_collapse"),
    ),
    Detector(
        "empty_slots",
        "structure",
        structure.detect_empty_slots,
        "view",
        ("profile",),
        kind_fields=("check_content",),
    ),
    Detector("broken_json", "structure", structure.detect_broken_json, "view", ("profile", "finish_reason")),
    Detector(
        "line_loop",
        "shortloops",
        shortloops.detect_line_loop,
        "view",
        ("profile",),
        thresholds={"copies": 3},  # one line this many times in a row (blank lines between allowed)
        candidates={"copies": (4, 3, 2)},
        kind_fields=("repetition_needs_open_end",),
    ),
    Detector(
        "short_loop",
        "shortloops",
        shortloops.detect_short_loop,
        "view",
        ("profile",),
        thresholds={"min_share": 0.5},  # of the visible text taken by the copies of one unit
        candidates={"min_share": (0.7, 0.6, 0.5, 0.4)},
        kind_fields=("repetition_needs_open_end",),
    ),
    Detector("word_loop", "shortloops", shortloops.detect_word_loop, "view", ("profile",)),
    Detector(
        "glued_tokens",
        "scripts",
        scripts.detect_glued_tokens,
        "view",
        ("profile",),
        thresholds={"min_glued": 1},  # glued words that fail a text with no other writing system in it
        candidates={"min_glued": (3, 2, 1)},
        kind_fields=("check_gibberish",),
    ),
    Detector(
        "short_gibberish",
        "words",
        words.detect_short_gibberish,
        "view",
        ("profile",),
        thresholds={"max_words": 6},  # words of three letters or more
        candidates={"max_words": (2, 4, 6, 10)},
    ),
    Detector("repeated_key", "structure", structure.detect_repeated_key, "view"),
    Detector(
        "phrase_loop",
        "loops",
        loops.detect_phrase_loop,
        "view",
        ("profile", "finish_reason"),
        thresholds={"min_copies": 4},  # copies of one five-word phrase in the last 1,500 characters
        candidates={"min_copies": (6, 5, 4)},
        kind_fields=("repetition_needs_open_end",),
    ),
    Detector(
        "cjk_token_soup",
        "scripts",
        scripts.detect_cjk_token_soup,
        "view",
        thresholds={"min_fragments": 3},  # different non-words of other scripts glued into CJK
        candidates={"min_fragments": (5, 4, 3, 2)},
    ),
    Detector(
        "cjk_in_code",
        "scripts",
        scripts.detect_stray_cjk_in_code,
        "view",
        thresholds={"min_runs": 2},  # CJK runs glued in front of numbers after code symbols
        candidates={"min_runs": (3, 2)},
    ),
    Detector(
        "crossed_brackets",
        "structure",
        structure.detect_crossed_brackets,
        "view",
        ("profile",),
        thresholds={"min_crossed": 2},  # brackets closed by the wrong kind
        candidates={"min_crossed": (4, 3, 2)},
    ),
    Detector(
        "count_gap",
        "structure",
        structure.detect_count_gap,
        "view",
        thresholds={"min_lines": 8},  # numbers one a line, in a row
        candidates={"min_lines": (12, 10, 8, 6)},
    ),
    Detector(
        "symbol_lines",
        "characters",
        characters.detect_symbol_lines,
        "view",
        ("profile",),
        thresholds={"min_lines": 6},  # lines of stray punctuation (and a seventh of the lines)
        candidates={"min_lines": (10, 8, 6, 4)},
        kind_fields=("check_content",),
    ),
    Detector(
        "punctuation_spam",
        "characters",
        characters.detect_punctuation_spam,
        "view",
        thresholds={"min_marks": 3},  # "!" or "?" between the words of a sentence (and a fifth of them)
        candidates={"min_marks": (5, 4, 3)},
    ),
    Detector("prompt_echo", "template", template.detect_prompt_echo, "head", ("prompt",)),
    Detector("invisible_chars", "characters", characters.detect_invisible, "scanned"),
    Detector("replacement_char", "characters", characters.detect_replacement_char, "scanned"),
    Detector(
        "special_token",
        "template",
        template.detect_special_tokens,
        "scanned",
        ("prompt",),
        emits=("special_token", "role_leak"),
    ),
    Detector(
        "tokenizer_leak",
        "template",
        template.detect_tokenizer_leak,
        "scanned",
        emits=("tokenizer_leak", "mojibake"),
    ),
    Detector(
        "partial_special_token",
        "template",
        template.detect_partial_tokens,
        "scanned",
        ("prompt",),
        thresholds={"min_tokens": 2},
        candidates={"min_tokens": (3, 2, 1)},
    ),
    Detector("stray_token", "scripts", scripts.detect_stray_cjk, "view"),
    Detector(
        "role_opening",
        "template",
        template.detect_role_opening,
        "scanned",
        ("prompt",),
        emits=("role_leak",),
    ),
    Detector(
        "end_marker_loop",
        "template",
        template.detect_end_markers,
        "scanned",
        thresholds={"min_markers": 3},
        candidates={"min_markers": (4, 3, 2)},
    ),
    Detector(
        "template_turns",
        "template",
        template.detect_template_turns,
        "scanned",
        ("prompt",),
        thresholds={"min_headers": 2},  # turn headers of both sides: one asking, one answering
        candidates={"min_headers": (4, 3, 2)},
    ),
    Detector("dangling_marker", "template", template.detect_dangling_marker, "scanned"),
    Detector(
        "invented_turn",
        "template",
        template.detect_invented_turn,
        "scanned",
        ("prompt",),
        emits=("role_leak",),
    ),
)

BY_NAME: dict[str, Detector] = {row.name: row for row in DETECTORS}
# finding name -> family (a finding name two rows can give belongs to the first row's family)
FAMILY_OF_FINDING: dict[str, str] = {}
for _row in DETECTORS:
    for _name in _row.findings:
        FAMILY_OF_FINDING.setdefault(_name, _row.family)


def limits(name: str) -> dict[str, Any]:
    """The thresholds of detector `name` as keyword arguments of its function (some int, some float:
    Any, so a caller's `**limits(name)` type-checks against the function's own parameters)."""
    return dict(BY_NAME[name].thresholds)
