"""Unit tests for each detector: hand-written (synthetic) positives and hard negatives.

Real labelled outputs live in /work/shared/corpus and are measured by benchmarks/detectors.py; the
texts here are written for the tests and say so.
"""

# ruff: noqa: RUF001 - CJK punctuation and Cyrillic letters are the point of several cases
from __future__ import annotations

import json

import pytest

from k26ctl.smoke.detectors import score_text
from k26ctl.smoke.detectors.characters import (
    detect_char_runs,
    detect_empty,
    detect_invisible,
    detect_low_content,
    detect_replacement_char,
)
from k26ctl.smoke.detectors.loops import detect_loops, detect_repetition, detect_tail_repeat
from k26ctl.smoke.detectors.score import MAX_SCANNED_EDGE
from k26ctl.smoke.detectors.scripts import detect_script_mix
from k26ctl.smoke.detectors.template import detect_prompt_echo, detect_special_tokens
from k26ctl.smoke.detectors.words import detect_gibberish, detect_non_words
from k26ctl.smoke.kinds import PROFILES, guess_kind

PROSE = PROFILES["prose"]
CODE = PROFILES["code"]

# ---- hard negatives (synthetic): healthy outputs that look suspicious --------------------------------

HEALTHY_PROSE = (
    "The sky looks blue because molecules in the air scatter short wavelengths of sunlight far more "
    "strongly than long ones. This effect, called Rayleigh scattering, sends blue light in every "
    "direction, so wherever you look you see it. At sunset the light crosses more air, the blue is "
    "scattered away before it reaches you, and the reds and oranges remain."
)
EXCLAIM_IN_SENTENCE = (
    "We won the final match after three long seasons of trying!!!!! What a day it was for us."
)
PYTHON_CODE = """```python
def area(shape):
    if shape.kind == "square":
        return shape.side * shape.side
    if shape.kind == "rectangle":
        return shape.width * shape.height
    if shape.kind == "circle":
        return 3.14159 * shape.radius * shape.radius
    return 0


# ----------------------------------------------------------------------------------------------
def total_area(shapes):
    total = 0
    for shape in shapes:
        total += area(shape)
    return total
```"""
MARKDOWN_TABLE = """| Region | Q1 | Q2 | Q3 | Q4 |
|--------|----|----|----|----|
| North  | 10 | 12 | 11 | 14 |
| South  |  9 |  9 |  9 |  9 |
| East   | 10 | 10 | 10 | 10 |
| West   |  8 |  8 |  8 |  8 |
|--------|----|----|----|----|
| Total  | 37 | 39 | 38 | 41 |"""
NUMBER_LIST = "Multiples of seven: " + ", ".join(str(7 * i) for i in range(1, 40)) + "."
NUMBERED_STEPS = "\n".join(
    f"Step {i}: add the {w} and stir for one minute."
    for i, w in enumerate(["flour", "sugar", "butter", "eggs", "milk", "vanilla", "salt"], start=1)
)
POEM_WITH_REFRAIN = """The tide comes in, the tide goes out,
and gulls complain of what it's about.
Row on, row on, the harbour light,
row on, row on, into the night.

The nets are mended, the boats are tied,
the children sleep on the landward side.
Row on, row on, the harbour light,
row on, row on, into the night.

The morning breaks on a silver sea,
and all the boats are running free."""
REFRAIN = "Row on, row on, the harbour light,\nrow on, row on, into the night."
SONG_ENDING_ON_ITS_REFRAIN = POEM_WITH_REFRAIN + "\n" + REFRAIN
CJK_PROSE = (
    "长城是中国古代的军事防御工程，历经多个朝代修筑，总长度超过两万公里。它横跨山脉、草原和沙漠，"
    "是世界上最宏伟的建筑之一。今天，长城已被列为世界文化遗产，每年吸引大量游客前来参观。"
)
JSON_ANSWER = json.dumps(
    {
        "items": [
            {"name": f"item-{i}", "price": 10 + i, "in_stock": True, "tags": ["new", "sale"]}
            for i in range(8)
        ]
    },
    indent=2,
)
EMOJI_ZWJ = "Astronauts on the crew: 👩\u200d🚀 and 👨\u200d🚀, both ready for launch tomorrow morning."


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        (HEALTHY_PROSE, "prose"),
        (EXCLAIM_IN_SENTENCE, "prose"),
        (PYTHON_CODE, "code"),
        (MARKDOWN_TABLE, "table"),
        (NUMBER_LIST, "list"),
        (NUMBERED_STEPS, "list"),
        (POEM_WITH_REFRAIN, "poem"),
        (SONG_ENDING_ON_ITS_REFRAIN, "poem"),
        (CJK_PROSE, "cjk"),
        (JSON_ANSWER, "json"),
        (EMOJI_ZWJ, "prose"),
        ("Paris", "short"),
        ("391", "short"),
        ("<think>\n\n</think>\n\nThe capital of France is Paris.", "prose"),
    ],
)
@pytest.mark.parametrize("declare_kind", [True, False])
def test_hard_negatives_are_not_degenerate(text: str, kind: str, declare_kind: bool) -> None:
    verdict = score_text(text, kind=kind if declare_kind else None)
    assert not verdict.degenerate, verdict.reasons
    assert verdict.reasons == []


def test_guess_kind_recognises_structure() -> None:
    assert guess_kind(PYTHON_CODE) == "code"
    assert guess_kind(MARKDOWN_TABLE) == "table"
    assert guess_kind(JSON_ANSWER) == "json"
    assert guess_kind(CJK_PROSE) == "cjk"
    assert guess_kind(NUMBERED_STEPS) == "list"
    assert guess_kind(HEALTHY_PROSE) == "prose"


# ---- empty ---------------------------------------------------------------------------------------


def test_empty_output_and_whitespace_only() -> None:
    assert detect_empty("")[0].detector == "empty"
    assert detect_empty(" \n\t ")
    assert detect_empty("\u200b\u200c \u200b")  # looks non-empty to len(), nothing to a reader
    assert detect_empty("ok") == []


# ---- character runs --------------------------------------------------------------------------------


def test_char_run_exclamation_collapse_like_the_mask_bug() -> None:
    findings = detect_char_runs("The.r" + "!" * 60, PROSE)
    assert findings and findings[0].detector == "char_run"
    assert findings[0].span == (5, 65)
    assert findings[0].excerpt.startswith("!!!!")


def test_char_run_short_output_made_of_one_letter() -> None:
    assert detect_char_runs("ggggggg", PROSE)  # short but it is the whole answer


def test_char_run_newline_wall_and_digits() -> None:
    assert detect_char_runs("Sure." + "\n" * 30 + "ok", PROSE)
    assert detect_char_runs("The answer is 9" + "1" * 40, PROSE)


def test_char_run_negatives() -> None:
    assert detect_char_runs(EXCLAIM_IN_SENTENCE, PROSE) == []
    assert detect_char_runs("Chapter one\n" + "=" * 30 + "\nIt began at dawn and ended at dusk.", PROSE) == []
    assert detect_char_runs("0x" + "0" * 16 + " is the null address in this 64-bit example.", CODE) == []


# ---- loops -----------------------------------------------------------------------------------------


def test_loop_phrase_repeated_back_to_back() -> None:
    text = "Understood. I will now run the test. " + "I will now run the test. " * 8
    findings = detect_loops(text, PROSE)
    assert findings
    assert "I will now run the test" in findings[0].message


def test_loop_cjk_characters_without_spaces() -> None:
    text = "洗衣是洗好洗开始开始。" + "洗小" * 15
    assert detect_loops(text, PROFILES["cjk"])


def test_tail_loop_short_token_repeated_until_the_end() -> None:
    text = "Once upon a time, a cat named Tom and a rabbit named named named named"
    findings = detect_loops(text, PROSE)
    assert [f.detector for f in findings] == ["tail_loop"]


def test_cut_in_loop_named_when_the_token_limit_stopped_it() -> None:
    text = "Once upon a time, a cat named Tom and a rabbit named named named named"
    findings = detect_loops(text, PROSE, finish_reason="length")
    assert findings[0].detector == "cut_in_loop"
    assert "token limit" in findings[0].message


def test_loop_negatives_refrain_and_code() -> None:
    assert detect_loops(POEM_WITH_REFRAIN, PROFILES["poem"]) == []
    assert detect_loops(PYTHON_CODE, CODE) == []
    assert detect_loops(MARKDOWN_TABLE, PROFILES["table"]) == []
    assert detect_loops("Ha ha ha, that is a good one. Tell me another joke tomorrow.", PROSE) == []


# ---- tail repeat (near loops) ------------------------------------------------------------------------


def test_tail_repeat_with_changing_separators() -> None:
    text = (
        "I enjoy walking with my dog, but I'm not sure if I'll ever be able to walk with my dog. "
        "I'm not sure if I'll ever be able to walk with my dog.\n\nI'm not sure if I'll"
    )
    findings = detect_tail_repeat(text, PROSE)
    assert findings and findings[0].detector == "tail_repeat"
    assert detect_tail_repeat(text, PROSE, finish_reason="length")[0].detector == "cut_in_loop"


def test_tail_repeat_negative() -> None:
    assert detect_tail_repeat(HEALTHY_PROSE, PROSE) == []
    assert detect_tail_repeat(POEM_WITH_REFRAIN, PROFILES["poem"]) == []


# ---- repetition / tail compression (late collapse) -------------------------------------------------


def test_late_collapse_after_a_healthy_start() -> None:
    text = HEALTHY_PROSE + " " + "and the blue and the blue light and the blue " * 20
    names = {f.detector for f in detect_repetition(text, PROSE)}
    assert {"repetition", "tail_compression"} <= names


def test_repetition_negative_long_healthy_text() -> None:
    assert detect_repetition(HEALTHY_PROSE + " " + HEALTHY_PROSE[::-1], PROSE) == []
    assert detect_repetition(JSON_ANSWER, PROFILES["json"]) == []


# ---- token soup / script mixing ---------------------------------------------------------------------


def test_token_soup_mixed_scripts_inside_words() -> None:
    text = (
        "alseular阳negneg вер VALUESalling阳 statementençneg LageTX subsequent VALUES門 "
        "посowner ençneg African"
    )
    findings = detect_script_mix(text, PROSE)
    assert findings and "Cyrillic" in findings[0].message


def test_token_soup_negative_bilingual_text() -> None:
    text = "我是一个名为 ChatGLM 的人工智能助手，可以用 English 或中文回答问题。In Russian, hello is привет."
    assert detect_script_mix(text, PROSE) == []
    assert detect_script_mix(CJK_PROSE, PROFILES["cjk"]) == []


# ---- gibberish / word salad -------------------------------------------------------------------------


def test_gibberish_fragments_and_misspellings() -> None:
    text = (
        "It hosts culture trade that celebrs France being number zero best vacanza. Which kind do of "
        "travel do Tourst believe is hittn Most fashion centery fthe U . a s trimek f SAN pins Hollland "
        "r n igenous wighti the new a gernial annd c m u sy weinest place m on The th e United"
    )
    findings = detect_gibberish(text, PROSE)
    assert findings and findings[0].detector == "gibberish"


def test_gibberish_negatives_units_abbreviations_and_code_kind() -> None:
    text = (
        "Divide 500g by 125g to get 4 candles. Washington, D.C. is not a state; the U.S. capital sits on "
        "the Potomac, about 5 km from Arlington. Dr. J. R. Smith said so in a talk at 3 pm on TV."
    )
    assert detect_gibberish(text, PROSE) == []
    assert detect_gibberish("x y z a b c d e f g h " * 5, CODE) == []


# ---- symbols -----------------------------------------------------------------------------------------


def test_symbol_soup_and_symbol_collapse() -> None:
    assert detect_low_content("ــ |ــ |ــ | | |ــ | | |ــ |ــ | | | |", PROSE)[0].detector == "symbol_soup"
    collapsed = (
        "Building a website can be done in ten simple steps, as follows:"
        + '!\t\n\n " $#\n\n!#\t\n\t#!▅▅ }{ ## )) <> ~~ ?! ▅ ;; % ^ }} @ " $# !#'
    )
    assert detect_low_content(collapsed, PROSE)[0].detector == "symbol_collapse"


def test_symbol_negatives() -> None:
    assert detect_low_content(HEALTHY_PROSE, PROSE) == []
    art = ",-'`-.\n   ,-'::::::::`-.\n  /::::::::::::::\\\n |::::::::::::::::|\n  \\::::::::::::::/"
    assert not score_text(art).degenerate


# ---- invisible / control / U+FFFD ------------------------------------------------------------------


def test_invisible_and_control_characters() -> None:
    assert detect_invisible("\u200c\u200c \u200c\u200c hello")[0].detector == "invisible_chars"
    assert detect_invisible("hello\x00\x01\x02 world")
    assert detect_invisible(EMOJI_ZWJ) == []
    assert detect_invisible("tabs\tand\nnewlines\r\nare fine") == []


def test_replacement_character() -> None:
    findings = detect_replacement_char("sunrise 🌅 and then \ufffd\ufffd")
    assert findings and findings[0].score == 2.0
    assert detect_replacement_char(HEALTHY_PROSE) == []


# ---- special tokens and role leaks -------------------------------------------------------------------


@pytest.mark.parametrize(
    "leak",
    [
        "<|im_start|>",
        "<|im_end|>",
        "<unk>",
        "</s>",
        "<|endoftext|>",
        "<|eot_id|>",
        "[PAD]",
        "<extra_id_0>",
        "<|im_assistant|>",
        "<\uff5cend\u2581of\u2581sentence\uff5c>",
    ],
)
def test_special_token_leaks(leak: str) -> None:
    findings = detect_special_tokens(f"The answer is four.{leak}")
    assert findings and findings[0].detector == "special_token"
    assert leak in findings[0].message


def test_special_token_mentioned_in_the_prompt_is_fine() -> None:
    prompt = "What does the <|im_start|> token mean?"
    assert detect_special_tokens("The <|im_start|> token opens a turn.", prompt) == []


def test_role_leak_invented_turn() -> None:
    findings = detect_special_tokens("<answer>66</answer>Human: In a classroom there are 30 students")
    assert findings and findings[0].detector == "role_leak"
    assert detect_special_tokens("Human: is the first word of this sentence.") == []


def test_think_tags_are_not_special_tokens() -> None:
    assert detect_special_tokens("<think>\nhmm\n</think>\n\nParis.") == []


# ---- prompt echo ---------------------------------------------------------------------------------


def test_prompt_echo() -> None:
    prompt = "Explain in two sentences why the sky is blue."
    assert detect_prompt_echo(prompt, prompt)[0].severity == "fail"
    warn = detect_prompt_echo(
        prompt + " Because air scatters blue light more than red light, mostly.", prompt
    )
    assert warn and warn[0].severity == "warn"
    assert detect_prompt_echo(HEALTHY_PROSE, prompt) == []


# ---- score_text end to end -------------------------------------------------------------------------


def test_score_text_names_findings_with_spans() -> None:
    verdict = score_text("The.r" + "!" * 40, kind="prose", finish_reason="length")
    assert verdict.degenerate
    assert any(r.startswith("char_run:") for r in verdict.reasons)
    for f in verdict.findings:
        assert 0 <= f.span[0] <= f.span[1] <= 45


def test_score_text_json_shape() -> None:
    data = score_text("GGGGGGGGGGGGGGGGGGGG").to_json()
    assert data["degenerate"] is True
    assert data["reasons"] and isinstance(data["findings"][0]["span"], list)
    json.dumps(data)


def test_score_text_long_text_late_loop_is_found_beyond_the_analysis_window() -> None:
    healthy = (HEALTHY_PROSE + " ") * 40  # about 14 000 characters, more than one analysis window
    verdict = score_text(healthy + "the blue, the blue, " * 30, kind="prose")
    assert verdict.degenerate
    assert min(f.span[0] for f in verdict.findings) > len(healthy) - 50


def test_non_words_catches_byte_level_garble_but_not_other_languages() -> None:
    # garble of the kind a byte-level model emits when its attention mask is wrong (synthetic)
    garble = (
        "Onet twoul appet lay hell appotone. One, cuy pherents wathe sky faren. Mong the eves gold nhapp "
        "to the thal downuperanes, rivers day sea. The wave mo fteps to watet the wond one ply on to light"
    )
    assert [f.detector for f in detect_non_words(garble, PROSE)] == ["non_words"]
    french = (
        "Le pain est fait de farine, d'eau, de sel et de levure. Le boulanger mélange le tout pour obtenir "
        "une pâte souple et la laisse lever dans un endroit chaud pendant une heure avant la cuisson."
    )
    assert detect_gibberish(french, PROSE) == []
    assert detect_non_words(french, PROSE) == []
    technical = (
        "Photosynthesis converts carbon dioxide and water into glucose in the chloroplasts of the leaf, "
        "using chlorophyll to absorb photons; the Calvin cycle then fixes carbon through RuBisCO."
    )
    assert detect_gibberish(technical, PROSE) == []
    assert detect_non_words(technical, PROSE) == []


def test_megabyte_text_is_bounded_and_says_so() -> None:
    text = (HEALTHY_PROSE + " ") * 3000 + "!" * 100
    verdict = score_text(text)
    assert verdict.degenerate
    names = {f.detector: f for f in verdict.findings}
    assert names["long_text"].severity == "warn"
    assert names["char_run"].span == (len(text) - 100, len(text))


def test_megabyte_text_is_checked_for_tokens_at_both_ends_with_spans_in_the_whole_text() -> None:
    filler = (HEALTHY_PROSE + " ") * 3000  # about a megabyte, more than twice MAX_SCANNED_EDGE
    assert len(filler) > 2 * MAX_SCANNED_EDGE
    text = "Sure. <|eot_id|> " + filler + "Done.<|im_end|> " + "Fine. " * 40
    verdict = score_text(text)
    names = {f.detector: f for f in verdict.findings}
    first, last = text.index("<|eot_id|>"), text.rindex("<|im_end|>") + len("<|im_end|>")
    assert names["special_token"].span == (first, last)
    assert "first and last 128000 checked for tokens" in names["long_text"].message
    # a token in the middle of such a text is past what the cheap checks read
    middle = filler[: len(filler) // 2] + "<|eot_id|>" + filler[len(filler) // 2 :]
    assert "special_token" not in {f.detector for f in score_text(middle).findings}


def test_stray_closing_think_tag() -> None:
    assert (
        detect_special_tokens("The sea is wide.</think>me a candle and a boat.")[0].detector
        == "special_token"
    )
    assert detect_special_tokens("<think>\nhmm\n</think>\nParis.") == []


def test_layout_lines_are_not_runs() -> None:
    heading = "Release notes\n" + "^" * 150 + "\nAdded support for lookaround in conditional patterns."
    assert not score_text(heading, kind="prose").degenerate
    box = "╭─ Arguments " + "─" * 60 + "╮\n│ name  TEXT  [required] │\n╰" + "─" * 70 + "╯"
    assert detect_char_runs(box, PROSE) == []
    assert detect_char_runs("Totals:" + "^" * 150 + " more text follows here", PROSE)  # not alone on its line


def test_markup_is_not_gibberish() -> None:
    text = (
        "See the `Quickstart <https://setuptools.pypa.io/en/latest/userguide/quickstart.html>`_ and the "
        "user guide for instructions on how to use it; keys may be `str`, `int` or `datetime.datetime`, "
        "and you can write to help@example.org if the docs at www.example.org are not clear enough for you."
    )
    assert detect_gibberish(text, PROSE) == []


def test_broken_json_structure_but_not_truncation() -> None:
    from k26ctl.smoke.detectors.structure import detect_broken_json

    profile = PROFILES["json"]
    broken = (
        '```json\n{\n  "items": [\n    {"item": "Kokosmilch", "amount": "400 ml"},\n'
        '    {"item": "Zwiebel", "1 Stück"},\n'
    )
    findings = detect_broken_json(broken, profile)
    assert findings and findings[0].detector == "broken_json"
    assert broken[findings[0].span[0] :].startswith("}")
    truncated = JSON_ANSWER[: len(JSON_ANSWER) // 2]
    assert detect_broken_json(truncated, profile) == []  # cut by the token limit
    assert detect_broken_json(
        truncated, profile, finish_reason="stop"
    )  # ... but not if the model stopped there
    assert detect_broken_json(JSON_ANSWER + "\n\nThis object lists eight items.", profile) == []
    assert detect_broken_json("```json\n" + JSON_ANSWER + "\n```", profile) == []
    assert detect_broken_json(broken, PROSE) == []


def test_line_loops_are_not_mistaken_for_verse() -> None:
    assert guess_kind(SONG_ENDING_ON_ITS_REFRAIN) == "poem"
    looping = "Here is the translation:\n" + "10 year old girls clothes\n\n" * 12
    assert guess_kind(looping) != "poem"
    assert score_text(looping).degenerate


def test_parallel_instructions_ending_the_same_way_are_fine() -> None:
    english = (
        "First, open the settings page, then click the Save button. Next, choose the file, then click the "
        "Save button. Finally, confirm the path, then click the Save button."
    )
    chinese = (
        "首先，打开设置页面，然后点击保存按钮。接着，选择文件，然后点击保存按钮。"
        "最后，确认路径，然后点击保存按钮。"
    )
    assert not score_text(english).degenerate
    assert not score_text(chinese).degenerate
    # the same words cut off mid-phrase by the token limit are a loop
    cut = english + " Then click the Save button. Then click the Save"
    assert score_text(cut, finish_reason="length").degenerate
