"""Baseline parity by token: a first divergence at a near tie of the baseline is tolerated, one at a
clear choice is a break (smoke/baseline.py), and SGLang's logprob fields are read in their real shape."""

from __future__ import annotations

from pathlib import Path

from k26ctl.smoke.baseline import NEAR_TIE_MARGIN, Baseline, BaselineEntry, compare
from k26ctl.smoke.client import top2_margins

IDS = [10, 11, 12, 13, 14, 15]
TEXT = "abcdef"


def _baseline(margins: list[float | None]) -> Baseline:
    entry = BaselineEntry("p", TEXT, "", 6, IDS, margins)
    return Baseline({"model": "m"}, "unit", {"p": entry})


def test_divergence_at_a_near_tie_is_tolerated_and_reported() -> None:
    base = _baseline([3.0, 2.5, 0.04, 1.0, 2.0, 2.0])
    result = compare(base, {"p": "abXdef"}, 1.0, {"p": [10, 11, 99, 13, 14, 15]})
    parity = result.prompts[0]
    assert not parity.match
    assert parity.first_token == 2 and parity.baseline_margin == 0.04 and parity.near_tie
    assert result.near_ties == ("p",)
    assert result.passed
    assert result.to_json()["near_ties"] == ["p"]


def test_divergence_at_a_clear_choice_fails() -> None:
    base = _baseline([3.0, 2.5, 1.7, 1.0, 2.0, 2.0])
    result = compare(base, {"p": "abXdef"}, 1.0, {"p": [10, 11, 99, 13, 14, 15]})
    parity = result.prompts[0]
    assert parity.first_token == 2 and parity.baseline_margin == 1.7 and not parity.near_tie
    assert not result.passed


def test_without_margins_or_ids_parity_is_by_text_as_before() -> None:
    base = Baseline({"model": "m"}, "unit", {"p": BaselineEntry("p", TEXT)})
    result = compare(base, {"p": "abXdef"}, 1.0, {"p": [10, 11, 99]})
    assert result.prompts[0].first_divergence == 2 and result.prompts[0].baseline_margin is None
    assert not result.passed


def test_baseline_file_keeps_ids_and_margins(tmp_path: Path) -> None:
    path = tmp_path / "b.json"
    _baseline([3.0, None, 0.1, 1.0, 2.0, 2.0]).save(path)
    loaded = Baseline.load(path)
    assert loaded.entries["p"].output_ids == IDS
    assert loaded.entries["p"].margins == [3.0, None, 0.1, 1.0, 2.0, 2.0]


def test_top2_margins_reads_sglangs_output_top_logprobs() -> None:
    # SGLang 0.5.15 tokenizer_manager.detokenize_top_logprobs_tokens: per output token None or
    # [(logprob, token_id, text-or-None), ...] best first, as JSON lists
    meta = {
        "output_top_logprobs": [
            [[-0.01, 5, None], [-4.61, 7, None]],
            None,
            [[-0.6, 3, "a"], [-0.8, 4, "b"]],
            [[-0.2, 9, None]],
        ]
    }
    margins = top2_margins(meta)
    assert margins is not None
    assert margins[0] == 4.6 and margins[1] is None and margins[3] is None
    assert abs((margins[2] or 0) - 0.2) < 1e-9 and (margins[2] or 0) <= NEAR_TIE_MARGIN
    assert top2_margins({}) is None and top2_margins(None) is None
