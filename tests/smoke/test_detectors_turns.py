"""Instruction-template turn headers after an answer (`template_turns`)."""

from __future__ import annotations

from k26ctl.smoke.detectors import score_text
from k26ctl.smoke.detectors.registry import limits
from k26ctl.smoke.detectors.template import detect_template_turns

RUN_ON = (
    "Paris is the capital of France.\n\n### Question:\n\nWhat is the capital of Spain?\n\n### Response:\n\n"
    "Madrid is the capital of Spain.\n\n### Question:\n\nWhat is the capital of Italy?\n\n### Response:\n\n"
    "Rome"
)


def test_invented_question_and_response_turns_fail_the_text() -> None:
    (finding,) = detect_template_turns(RUN_ON, "What is the capital of France?", **limits("template_turns"))
    assert finding.score == 4.0 and "### Question:" in finding.message
    assert finding.span[0] == RUN_ON.index("### Question:")
    assert "template_turns" in {f.detector for f in score_text(RUN_ON, prompt="Capital of France?").findings}


def test_headers_the_user_asked_for_or_quoted_in_code_pass() -> None:
    limit = limits("template_turns")
    prompt = "### Instruction:\nAnswer briefly.\n\n### Response:\n"
    assert detect_template_turns(RUN_ON, prompt, **limit) == []
    quoted = (
        "The Alpaca format looks like this:\n```\n### Instruction:\nSay hi\n\n### Response:\nHi\n```\nUse it."
    )
    assert detect_template_turns(quoted, None, **limit) == []
    headings = "Intro.\n\n### Response:\n\nThe server answers 200.\n\n### Output:\n\nA JSON body."
    assert detect_template_turns(headings, None, **limit) == []  # one side only: section titles
