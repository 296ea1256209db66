# ruff: noqa: RUF001 - the examples mix scripts on purpose
"""Detectors of issue 25: small-scale loops, chat-template debris, glued vocabulary pieces, stray CJK
tokens and repeated JSON keys, with the healthy texts they must leave alone (examples written for
these tests, after the failure kinds reported in public bug reports)."""

from __future__ import annotations

import pytest

from k26ctl.smoke.detectors import run_detector, score_text
from k26ctl.smoke.detectors.registry import DETECTORS, limits
from k26ctl.smoke.detectors.shortloops import detect_line_loop
from k26ctl.smoke.detectors.structure import detect_repeated_key
from k26ctl.smoke.detectors.template import (
    detect_end_markers,
    detect_invented_turn,
)
from k26ctl.smoke.kinds import PROFILES

PROSE = PROFILES["prose"]


def failing(text: str, prompt: str | None = None) -> set[str]:
    return {f.detector for f in score_text(text, prompt=prompt).findings if f.severity == "fail"}


@pytest.mark.parametrize(
    ("text", "detector"),
    [
        (" Fix the parser.\n\n Fix the parser.\n\n Fix the parser.", "line_loop"),
        ("Then it\n.\n\nThe next one\n\n.\n\nThe next one\n\n.", "short_loop"),
        (" so. Hold on, we'r... Hold on, we'r... Ho", "short_loop"),
        ("It flows through Lyon along the Rhone River Rhone River Rhone and on.", "word_loop"),
        ("The sequence is one, two, three, three, four and then five.", "word_loop"),
        ("Sure! I can end_turn help_you with <start_of_turn that today.", "partial_special_token"),
        ("assistant\nThe capital of Italy is Rome.", "role_leak"),
        ("<|assistant|>The capital of Italy is Rome.", "role_leak"),
        ("That is all. [DONE] [NO MORE] [STOP] [END] [END]", "end_marker_loop"),
        ('{"city": "Rome", "city": "Rome", "city": "Rome", "city": "Ro', "repeated_key"),
        (
            "def area(r):\n    return 3.14159 *的 r * r\n\nprint(area(2))  # area of a circle of radius 2",
            "stray_token",
        ),
        ("GardenTorontoxu RIVER Wellington pencils Orchestra", "glued_tokens"),
        ("Your answer: .formatDate Lindqvistébr zxq Kat花园 NOTEPricingrovel", "glued_tokens"),
        ("ovrelbask", "short_gibberish"),
        ("prentu kalsivo kalsivo", "short_gibberish"),
    ],
)
def test_small_scale_failures_are_caught(text: str, detector: str) -> None:
    assert detector in failing(text), score_text(text).reasons


def test_a_question_said_back_is_an_echo_at_any_length() -> None:
    assert "prompt_echo" in failing("What is RAM?", prompt="What is RAM?")
    assert failing("Hello", prompt="Hello") == set()  # a greeting answered in kind


def test_an_invented_next_question_needs_the_prompt() -> None:
    text = "Rome\n\nQuestion: What is 3 + 3?\nAnswer: 6\n\nQuestion: What is the largest ocean?\nAnswer:"
    assert detect_invented_turn(text, "What is the capital of Italy?")
    assert not detect_invented_turn(text, None)
    assert not detect_invented_turn(text, "Write a quiz with questions and answers about geography.")


@pytest.mark.parametrize(
    "text",
    [
        # refrains, chants and enumerations people write
        "Row, row, row your boat,\nGently down the stream.\nMerrily, merrily, merrily,\nLife is a dream.",
        "Ha ha ha, very funny. No, no, no, that is not what I meant.",
        "We need eggs, flour, sugar, butter and milk for the cake.",
        "Hip hip hooray! Hip hip hooray!\nThree cheers for the team.",
        # a line said twice is emphasis, three times in code is a table
        "Stop.\nStop.\nThen look both ways before you cross.",
        "rows = [\n    [0, 0, 0],\n    [0, 0, 0],\n    [0, 0, 0],\n    [0, 0, 0],\n]\n",
        # chat-template names inside code, and explained in prose with their brackets
        "Set `stop=['im_end', 'eot_id']` so the server ends the turn at `im_end`.",
        "```python\ntokens = ['im_start', 'im_end', 'eot_id']\n```",
        # one brand in a sentence, identifiers used again, a greeting that mentions an assistant
        "I moved the database to PostgreSQL last year and it has been fast and reliable since then.",
        "GdkPixbuf loads images. Call GdkPixbuf functions from the main thread. GdkPixbuf is small.",
        "Hello! I'm an assistant here to help you. What can I do for you today?",
        # CJK written on purpose inside English
        "In Japanese, thank you is written ありがとう (arigatou) and is used everywhere.",
        "Chinese and English mixed: 我们使用Python来处理数据，然后用SQL查询结果。这很方便。",
        # short real answers, JSON records, stop markers mentioned once
        "Paris.",
        "Yes, that works.",
        '[{"id": 1, "name": "a"}, {"id": 2, "name": "b"}, {"id": 3, "name": "c"}]',
        "Type [END] when you are done, and the form will be sent.",
    ],
)
def test_healthy_texts_pass(text: str) -> None:
    assert failing(text) == set(), score_text(text).reasons


def test_findings_name_the_span_that_decided() -> None:
    text = "Intro.\n\nRepeat this.\n\nRepeat this.\n\nRepeat this."
    (finding,) = detect_line_loop(text, PROSE, **limits("line_loop"))
    assert text[finding.span[0] : finding.span[1]].startswith("Repeat this.")
    assert "3 times" in finding.message
    (marker,) = detect_end_markers("x [END] [STOP] [END]", **limits("end_marker_loop"))
    assert marker.span == (2, 20)
    (key,) = detect_repeated_key('{"a": 1, "a": 2, "a": 3}')
    assert key.score == 3.0 and "'a'" in key.message


def test_each_detector_alone_stays_quiet_on_plain_prose() -> None:
    text = "The river runs through the old town, past the market and the church, to the sea."
    for row in DETECTORS:
        assert run_detector(row.name, text, kind="prose") == [], row.name
