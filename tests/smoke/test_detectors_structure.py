"""Unit tests for kind guessing of structured text and for the rules that keep repetition in code,
tables and parallel prose from being called a loop. Every text here is synthetic (written for the
tests); real labelled outputs are measured by benchmarks/detectors.py."""

from __future__ import annotations

import pytest

from k26ctl.smoke.detectors import score_text
from k26ctl.smoke.detectors.loops import detect_loops, detect_repetition
from k26ctl.smoke.detectors.structure import detect_empty_slots
from k26ctl.smoke.kinds import PROFILES, guess_kind
from k26ctl.smoke.textstats import ends_in_repetition, novel_word_share

ZERO_TABLE = (
    "static const uint8_t font[256][8] = {\n"
    + "    {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00},\n" * 24
    + "    {0x18, 0x3C, 0x66, 0x66, 0x7E, 0x66, 0x66, 0x00},\n};\n"
)
HTML_TABLE = (
    "<table>\n"
    + "".join(f"  <tr>\n    <td>{i}</td>\n    <td>item</td>\n    <td>ok</td>\n  </tr>\n" for i in range(15))
    + "</table>\n"
)
ENUM = "class Color(Enum):\n" + "".join(f"    COLOR_{i} = {i}\n" for i in range(40))
YAML = "services:\n" + "".join(
    f'  svc{i}:\n    image: nginx:latest\n    restart: always\n    ports:\n      - "80{i:02d}:80"\n'
    for i in range(8)
)
HEX_DUMP = "\n".join(
    f"{i * 16:08x}  00 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00  |................|" for i in range(10)
)
PARSER = (
    "def parse(tokens):\n    result = []\n    for tok in tokens:\n        if tok.kind == 'NUM':\n"
    "            result.append(int(tok.value))\n        elif tok.kind == 'STR':\n"
    "            result.append(tok.value)\n        else:\n"
    "            raise ValueError(tok)\n    return result\n"
)
LOG = "\n".join(
    f"2024-05-0{1 + i % 9} 12:{i:02d}:01 INFO worker-{i % 3} processed batch {i}" for i in range(30)
)
LEGAL = (
    "The Licensee shall not copy the Software except as expressly permitted by this Agreement. "
    "The Licensee shall not modify the Software except as expressly permitted by this Agreement. "
    "The Licensee shall not distribute the Software except as expressly permitted by this Agreement. "
    "The Licensee shall not sublicense the Software except as expressly permitted by this Agreement. "
    "The Licensee shall not rent the Software except as expressly permitted by this Agreement."
)


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        (HTML_TABLE, "code"),
        (ENUM, "code"),
        (YAML, "code"),
        (PARSER, "code"),
        (LOG, "code"),
        (HEX_DUMP, "table"),
        ("\n".join(f"{i}, {i * i}, {i**3}" for i in range(10)), "table"),
    ],
)
def test_structured_text_is_recognised(text: str, kind: str) -> None:
    assert guess_kind(text) == kind


@pytest.mark.parametrize("text", [ZERO_TABLE, HTML_TABLE, ENUM, YAML, HEX_DUMP, PARSER, LOG, LEGAL])
def test_repetitive_but_valid_structure_is_not_degenerate(text: str) -> None:
    assert not score_text(text).degenerate, score_text(text).reasons


def test_ends_in_repetition_needs_the_last_lines_to_be_copies() -> None:
    assert not ends_in_repetition(ZERO_TABLE)  # closed with a new row and "};"
    looping = "def f(x):\n    y = x * 2\n" + "    y = y + 1\n" * 20
    assert ends_in_repetition(looping)
    assert ends_in_repetition(looping + "    y = y")  # cut inside a copy
    assert not ends_in_repetition("a\nb\nc")


@pytest.mark.parametrize(
    "text",
    [
        "def f(x):\n    y = x * 2\n" + "    y = y + 1\n" * 20,
        '{"recipe": "curry", "ingredients": [\n' + '  {"item": "coconut milk", "amount": "400 ml"},\n' * 12,
        "| a | b |\n|---|---|\n| x | 1 |\n" + "| y | 2 |\n" * 25,
        "<ul>\n  <li>one</li>\n" + "  <li>two</li>\n" * 20,
        ZERO_TABLE.rsplit("    {0x18", 1)[0],  # the same table cut while repeating
    ],
)
def test_structured_text_still_looping_at_its_end_is_degenerate(text: str) -> None:
    assert score_text(text).degenerate


def test_a_closed_block_loop_in_code_is_not_a_loop_but_an_open_one_is() -> None:
    code = PROFILES["code"]
    assert [f for f in detect_loops(ZERO_TABLE, code) if f.detector == "loop"] == []
    assert detect_loops(ZERO_TABLE.rsplit("    {0x18", 1)[0], code)


def test_novel_word_share() -> None:
    assert novel_word_share("a b c a b c", 6) == 0.0
    assert novel_word_share("a b c d", 0) == 1.0
    assert 0.0 < novel_word_share(LEGAL, len(LEGAL) // 2) < 0.2


def test_parallel_clauses_need_a_clear_margin_or_no_new_words() -> None:
    prose = PROFILES["prose"]
    assert detect_repetition(LEGAL, prose) == []
    # the same amount of repetition without any new word is a loop with small variations
    looping = (
        "Sure, I can help with that. Let me look first. "
        + "I will now run the test. I will now execute the test. " * 6
    )
    assert [f.detector for f in detect_repetition(looping, prose)][:1] == ["repetition"]


def test_near_copy_of_a_finished_sentence_is_style_but_a_cut_one_is_a_restart() -> None:
    finished = (
        "The Licensee shall not copy the Software at all. The Licensee shall not modify the Software at all."
    )
    assert not score_text(finished).degenerate
    cut = finished + " The Licensee shall not modify the Software at"
    assert score_text(cut).degenerate


def test_repeated_assertions_in_a_test_are_code() -> None:
    text = (
        "class T(unittest.TestCase):\n    def test_a(self):\n" + "        self.assertTrue(ok())\n" * 4 + "\n"
        "    def test_b(self):\n        self.assertFalse(bad())\n"
    )
    assert guess_kind(text) == "code"
    assert not score_text(text).degenerate


def test_json_array_of_identical_objects_that_closes_is_fine() -> None:
    text = "[\n" + ",\n".join('  {"name": "sensor", "value": 0, "unit": "C"}' for _ in range(15)) + "\n]"
    assert not score_text(text).degenerate
    assert score_text(text.removesuffix("\n]") + ',\n  {"name": "sen').degenerate


def test_templated_sections_each_adding_a_number_are_not_repetition() -> None:
    text = "# Plan\n\n" + "".join(
        f"### Step {i}\n**Goal:** finish part {i} of the migration.\n"
        f"**Action:** run the script for batch {i} and check the logs.\n\n"
        for i in range(1, 9)
    )
    assert not score_text(text).degenerate


def test_one_letter_labels_are_not_fragments() -> None:
    text = "\n".join(f"Q: What is {i} plus {i}?\nA: {2 * i}" for i in range(2, 7))
    assert not score_text(text).degenerate


@pytest.mark.parametrize(
    "text",
    [
        "Name: Ada, Age:., City:., Country:., Job: ",
        "Answer 1: yes; answer 2:; answer 3:, answer 4:.",
    ],
)
def test_a_template_with_empty_slots_is_broken(text: str) -> None:
    assert [f.detector for f in detect_empty_slots(text, PROFILES["prose"])] == ["empty_slots"]
    assert score_text(text).degenerate


@pytest.mark.parametrize(
    "text",
    [
        "Name:\nAge:\nCity:\nCountry:\n",  # a blank form asked for, one label a line
        "The meeting is at 10:30. Bring the 1:1 notes, the Q3 report: and the budget.",
        "Ratios were 3:1, 2:1 and 1:1; see note: the last one is rounded.",
        "def f():\n    pass\nelse:\n    x = {'a':1, 'b':2}\n",
    ],
)
def test_labels_with_values_or_line_breaks_are_not_empty_slots(text: str) -> None:
    assert detect_empty_slots(text, PROFILES["prose"]) == []
