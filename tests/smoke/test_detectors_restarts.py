"""Unit tests for the restart and whole-answer-loop rules. Every text here is synthetic (written for
the tests); real labelled outputs are measured by benchmarks/detectors.py."""

# ruff: noqa: RUF001 - CJK punctuation is the point of several cases
from __future__ import annotations

import pytest

from k26ctl.smoke.detectors import score_text
from k26ctl.smoke.detectors.loops import detect_loops, detect_restart
from k26ctl.smoke.kinds import PROFILES
from k26ctl.smoke.restarts import enumeration_restart, final_restatement

PROSE = PROFILES["prose"]

# ---- the last sentence re-states the previous one ------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "We checked the logs twice. The server restarted at noon after the update. "
        "The server restarted at noon after the update.",
        "I am not sure that the bridge will hold the weight. I am sure that the bridge will hold the",
        "The recipe needs two cups of flour and one egg. The recipe needs two cups of flour and one",
        "今天我们去公园散步，看到了很多花。今天我们去公园散步，看到了很多",
    ],
)
def test_restatement_of_the_previous_sentence_is_found(text: str) -> None:
    findings = detect_restart(text, PROSE)
    assert [f.detector for f in findings] == ["tail_repeat"]
    assert findings[0].span[1] == len(text)
    assert score_text(text).degenerate


def test_restatement_cut_at_the_token_limit_is_named_so() -> None:
    text = "Paris is the capital of France and its largest city. Paris is the capital of France and its"
    assert [f.detector for f in detect_restart(text, PROSE, "length")] == ["cut_in_loop"]


@pytest.mark.parametrize(
    "text",
    [
        # parallel sentences that differ in what they say
        "The capital of France is Paris. The capital of Spain is Madrid. The capital of Italy is Rome.",
        "Step 4: Write your website content. Step 5: Install security features to protect your site.",
        # an emphatic short repeat is below the word floor
        "Never give up. Never give up.",
        # a repeat in the middle that the text moves on from
        "The test failed again. The test failed again. So we rolled back the release and wrote a report "
        "for the team explaining what went wrong.",
        # CJK prose whose sentences share a frame
        "春天来了，花开了。夏天来了，天气热了。秋天来了，叶子黄了。",
    ],
)
def test_distinct_or_short_sentences_are_not_restatements(text: str) -> None:
    assert detect_restart(text, PROSE) == []


def test_restatement_is_off_for_poems_lists_and_code() -> None:
    chorus = "Oh the river runs down to the sea tonight. Oh the river runs down to the sea tonight."
    for kind in ("poem", "list", "code", "table", "json"):
        assert [f for f in detect_restart(chorus, PROFILES[kind]) if f.detector == "tail_repeat"] == []
    assert not score_text(chorus, kind="poem").degenerate


def test_final_restatement_measures_the_cut_copy_against_the_opening() -> None:
    found = final_restatement("One two three four five six seven eight. One two three four five six")
    assert found is not None and found.similarity == 1.0 and found.units == 6


# ---- a numbered answer that starts again from step 1 ----------------------------------------------

RESTARTED = (
    "Step 1: read the question and list what is known\n"
    "Step 2: the two trains meet when their distances add up to 300 km\n"
    "Step 3: so 60t + 40t = 300 and t = 3 hours\n"
    "Step 4: the answer is 3 hours\n"
    "Step 1: first read the question carefully and list what we know\n"
    "Step 2: the trains meet once the distances they cover add up to 300 km\n"
    "Step 3: therefore t = 3\n"
)


def test_numbered_answer_restart_is_found() -> None:
    restart = enumeration_restart(RESTARTED)
    assert restart is not None and restart.reached == 4 and restart.matched >= 2
    findings = [f for f in detect_restart(RESTARTED, PROFILES["list"]) if f.detector == "answer_restart"]
    assert len(findings) == 1 and RESTARTED[findings[0].span[0] :].startswith("Step 1: first read")
    assert score_text(RESTARTED).degenerate


def test_restart_across_an_elision_line_is_found() -> None:
    text = RESTARTED.replace("Step 3: so", ".  .  .\nStep 3: so")
    assert enumeration_restart(text) is not None


@pytest.mark.parametrize(
    "text",
    [
        # two lists, each under its own heading, with the same steps: per-platform instructions
        "On Linux:\n1. Download the installer\n2. Run the installer\n3. Restart the machine\n"
        "On Windows:\n1. Download the installer\n2. Run the installer as administrator\n3. Restart\n",
        # numbering restarts but the items are new (pros then cons without headings)
        "1. It is fast\n2. It is cheap\n3. It runs everywhere\n"
        "1. The documentation is thin\n2. Upgrades break plugins\n3. Few people know it\n",
        # a numbered list that never restarts
        "1. Preheat the oven\n2. Mix flour and sugar\n3. Add the eggs\n4. Bake for 30 minutes\n",
        # sub-steps that count from 1 under a short run
        "1. Boil water\n2. Add pasta\n1. Stir now and then\n2. Drain\n",
    ],
)
def test_lists_that_are_not_restarts(text: str) -> None:
    assert enumeration_restart(text) is None
    assert not score_text(text).degenerate


def test_restart_rule_is_off_for_code() -> None:
    assert [f for f in detect_restart(RESTARTED, PROFILES["code"]) if f.detector == "answer_restart"] == []


# ---- the whole answer is one unit said three times -------------------------------------------------


@pytest.mark.parametrize("text", ["foss foss foss", "资料资料资料...", "hello world hello world hello world"])
def test_whole_answer_loop_is_found(text: str) -> None:
    assert any(f.detector == "loop" for f in detect_loops(text, PROFILES["short"]))
    assert score_text(text).degenerate


@pytest.mark.parametrize(
    "text",
    [
        "ha ha ha",  # laughter: the unit is too short to be a loop by itself
        "No, no, no.",
        "foss foss",  # two copies
        "I said foss foss foss, and then we laughed about the typo for a while.",  # part of a sentence
        "谢谢谢谢",
    ],
)
def test_short_repeats_that_are_not_whole_answer_loops(text: str) -> None:
    assert not score_text(text).degenerate


# ---- a paragraph that starts the answer over ---------------------------------------------------------

FIRST = (
    "To solve this, first compute the sum of the digits: 1 + 2 + 3 = 6. Since 6 is divisible by 3, the "
    "number is divisible by 3."
)


def test_paragraph_restart_cut_off_in_other_words_is_found() -> None:
    text = (
        FIRST
        + "\n\nTo solve this problem, we first compute the sum of the digits: 1 + 2 + 3 = 6. Since 6 is "
        "divisible by 3, the number is"
    )
    findings = [f for f in detect_restart(text, PROSE) if f.detector == "answer_restart"]
    assert len(findings) == 1 and findings[0].span == (0, len(text))
    assert score_text(text).degenerate


def test_paragraph_said_again_right_after_itself_is_found() -> None:
    assert score_text(FIRST + "\n\n" + FIRST.replace("first compute", "compute")).degenerate


@pytest.mark.parametrize(
    "text",
    [
        # a chorus that comes back after a verse
        "I walked along the empty road and the night was cold and long and I was alone\n\n"
        "And I sing and I sing till the morning comes and the light is on the hill\n\n"
        "The stars were out above the hills and I hummed a quiet song to myself\n\n"
        "And I sing and I sing till the morning comes and the light is on the hill",
        # paragraphs that open alike and then say different things
        "In summary, the first option is cheaper to run and easier to maintain for a small team.\n\n"
        "In summary, the second option scales better but needs a dedicated operator and more hardware.",
        # a poem printed twice is verse, not prose
        "床前明月光，\n疑是地上霜。\n举头望明月，\n低头思故乡。\n\n床前明月光，\n疑是地上霜。\n举头望明月，\n低头思故乡。",
    ],
)
def test_paragraphs_that_are_not_restarts(text: str) -> None:
    assert not score_text(text).degenerate, score_text(text).reasons


def test_a_similarity_floor_changes_only_whether_a_match_is_returned() -> None:
    from k26ctl.smoke.restarts import paragraph_restart

    paragraphs = [
        "The committee met on Monday to discuss the budget for the coming year and the new hires",
        "Rain fell over the valley all afternoon while the farmers waited for the trucks to arrive",
        "The committee met on Monday to discuss the budget for the coming year and the new roads",
    ]
    text = "\n\n".join(paragraphs)
    best = paragraph_restart(text)
    assert best is not None and best.earlier_start == 0 and 0.9 < best.similarity < 1.0
    assert paragraph_restart(text, at_least=0.9) == best
    assert paragraph_restart(text, at_least=best.similarity) == best
    assert paragraph_restart(text, at_least=0.99) is None
    sentences = "One two three four five six seven eight. One two three four nine six seven eight"
    found = final_restatement(sentences)
    assert found is not None and found.similarity == 0.875
    assert final_restatement(sentences, at_least=0.875) == found
    assert final_restatement(sentences, at_least=0.88) is None
