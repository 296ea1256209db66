# ruff: noqa: RUF001 - the examples mix scripts on purpose
"""Word-level detectors: non-words and word salad, stutter, script mixing, tokenizer leaks, role tags,
and the hard negatives they must leave alone (examples written for these tests)."""

from __future__ import annotations

import json
import sys

import pytest

from k26ctl.smoke import wordlists
from k26ctl.smoke.batch import Request, score_many
from k26ctl.smoke.detectors import preload, score_text
from k26ctl.smoke.detectors.registry import limits
from k26ctl.smoke.detectors.scripts import detect_script_mix
from k26ctl.smoke.detectors.structure import detect_broken_json
from k26ctl.smoke.detectors.template import detect_special_tokens, detect_tokenizer_leak
from k26ctl.smoke.detectors.words import detect_non_words, detect_stutter
from k26ctl.smoke.finding import Finding
from k26ctl.smoke.kinds import PROFILES
from k26ctl.smoke.lexicon import guess_language, is_word
from k26ctl.smoke.wordstats import words_of

PROSE = PROFILES["prose"]

STUTTER = limits("stutter")


def detectors(findings: list[Finding]) -> list[str]:
    return [f.detector for f in findings]


def test_words_know_their_scripts() -> None:
    words = words_of("don't isтельно 使用Python 10μm")
    assert [w.text for w in words] == ["don't", "isтельно", "使用Python", "μm"]
    # "μm" switches script too; script_mix ignores one-letter runs (a unit, not glued vocabulary)
    assert [w.mixed for w in words] == [False, True, False, True]
    assert words[1].scripts == ("Latin", "Cyrillic") and words[1].run_lengths == (2, 6)


def test_language_guess_and_word_lists() -> None:
    assert guess_language(["the", "cat", "sat", "on", "the", "mat"], "Latin")[0] == "en"
    french = ["le", "chat", "est", "sur", "la", "table", "avec", "les", "enfants"]
    assert guess_language(french, "Latin")[0] == "fr"
    assert is_word("kubernetes", "en") and not is_word("farnelqu", "en")


def test_word_salad_and_late_collapse() -> None:
    salad = " ".join(
        ["memorial", "warehouse", "census", "agrun", "memorial", "voegen", "person", "census", "lte"] * 3
    )
    assert "word_salad" in detectors(detect_non_words(salad, PROSE))
    healthy = (
        "The river runs through the old town and the children play on its banks in the summer. "
        "In the evening the lamps are lit, and the people walk along the water to the square."
    )
    collapse = healthy + " marlowen quixt fenders parade brixomatic lanterns orchard vellumine dockyards"
    collapse += " ferrule tinsmith cobbles quayside mizzen halyard bollards capstan gunwale rigging"
    assert detectors(detect_non_words(healthy, PROSE)) == []
    assert "word_salad" in detectors(detect_non_words(collapse, PROSE))


def test_a_list_of_tags_is_not_word_salad() -> None:
    tags = "\n".join(
        ["travel, budget, beach, hotel", "museum, food, hiking, train", "camping, ferry, market, castle"] * 3
    )
    assert detectors(detect_non_words(tags, PROSE)) == []


def test_stutter_doubled_pairs_and_words() -> None:
    assert detectors(
        detect_stutter("He was one of the of the best players of his time.", PROSE, **STUTTER)
    ) == ["stutter"]
    doubled = "Can can you you share share the the plan plan with with me me today today?"
    assert detectors(detect_stutter(doubled, PROSE, **STUTTER)) == ["stutter"]
    for fine in (
        "I think that that is right, and I had had enough by then. Bye bye!",
        "Antonio Antonio, was tired of living alone",
        "Nous nous sommes levés tôt pour voir le soleil sur la mer ce matin.",
        "Die Frau, die die Zeitung liest, sitzt im Garten.",
        "Row, row, row your boat, gently down the stream.",
    ):
        assert detect_stutter(fine, PROSE, **STUTTER) == [], fine
    assert detect_stutter("x = x + 1\ny = y y", PROFILES["code"], **STUTTER) == []


def test_script_mixing_inside_words_but_not_cjk_with_latin_terms() -> None:
    soup = "The answer isтельно clear, верcias and разôtallaance again"
    findings = detect_script_mix(soup, PROSE)
    assert detectors(findings) == ["script_mix"] and "Cyrillic" in findings[0].message
    for fine in (
        "我们使用Python和API来处理数据，然后用SQL查询。",
        "Pythonで書いたスクリプトをAPIに送ります。",
        "API를 호출하면 JSON을 받습니다.",
        "The filter passes particles above 10μm and 5μs pulses.",
        "Hello is привет in Russian and 你好 in Chinese.",
    ):
        assert detect_script_mix(fine, PROSE) == [], fine


def test_tokenizer_markers_byte_tokens_and_mojibake() -> None:
    assert detectors(detect_tokenizer_leak("ĠThe Ġcat Ġsat ĊĊ")) == ["tokenizer_leak"]
    assert detectors(detect_tokenizer_leak("line one<0x0A>line two")) == ["tokenizer_leak"]
    assert detectors(detect_tokenizer_leak("the ▁quick ▁brown fox")) == ["tokenizer_leak"]
    assert "mojibake" in detectors(detect_tokenizer_leak("Ð¿Ñ€Ð¾Ð´Ð°Ð¶Ðµ and kÃ¶nnen"))
    for fine in ("CPU ▁▂▃▅▇ load", "The café serves crème brûlée — “naïve” résumé.", "Ġgantija is in Gozo."):
        assert detect_tokenizer_leak(fine) == [], fine


def test_placeholders_harmony_markup_and_glued_roles() -> None:
    assert detectors(detect_special_tokens("Orts[control_230][control_137] memorial")) == ["special_token"]
    harmony = "<|channel|>analysis<|message|>The user wants a poem.<|end|><|start|>assistant<|channel|>final"
    harmony += "<|message|>Here it is."
    assert detect_special_tokens(harmony) == []
    glued = "About 2.1 million people live there. Iassistant\n\nIs there anything else?"
    assert detectors(detect_special_tokens(glued)) == ["role_leak"]
    transcript = "user\nWhere is the cat?\nmodel\nThe cat is on the mat."
    assert detect_special_tokens(transcript) == []
    assert detect_special_tokens("Ask the superuser or the end user\nfor access.") == []


def test_json_fence_closed_around_an_unterminated_document() -> None:
    broken = '```json\n{\n  "items": [\n    {"name": "a"},\n    {"name": "b"}\n```'
    assert detectors(detect_broken_json(broken, PROFILES["json"])) == ["broken_json"]
    cut = '```json\n{\n  "items": [\n    {"name": "a"},\n    {"name": "b"'
    assert detect_broken_json(cut, PROFILES["json"]) == []  # cut at the token limit, fence never closed


def test_score_many_keeps_order_in_process_and_in_workers() -> None:
    texts = [f"The answer to question {i} is {i * 2}." for i in range(300)] + ["!!!!!!!!!!!!!!!!!!!!!!!!"]
    requests = [Request(t) for t in texts]
    in_workers = list(score_many(requests, workers=2))
    alone = list(score_many(requests, workers=1))
    assert [v.degenerate for v in in_workers] == [v.degenerate for v in alone] == [False] * 300 + [True]
    assert json.dumps([v.to_json() for v in in_workers]) == json.dumps([v.to_json() for v in alone])
    assert score_text(texts[0]) == alone[0]


def test_preload_leaves_nothing_for_a_latin_text_to_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a scoring worker would read on first use is read by preload, before the pool forks."""
    preload()
    assert "ftfy.badness" in sys.modules

    def read_again(*args: object) -> object:
        raise AssertionError(f"word list {args} read after preload")

    monkeypatch.setattr(wordlists, "_read", read_again)
    monkeypatch.setattr(wordlists, "_build", read_again)
    # no function word at all: every Latin-script language's common words are consulted
    salad = "quindle fraptious snorbwick glimmerfax trundlewump zorbly plinket"
    assert "non_words" in detectors(score_text(salad).findings)
    assert not score_text("The cat sat on the mat, and then it went home for dinner.").degenerate
    assert "mojibake" in detectors(score_text("The cafÃ© served crÃ¨me brÃ»lÃ©e to everyone.").findings)
