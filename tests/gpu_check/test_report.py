"""The GPU check's report side (scripts/gpu/run_check.py), on results shaped as a real run writes them:
the rules are evaluated from what was measured, and the Markdown shows every configuration."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "k26_gpu_run_check", ROOT / "scripts" / "gpu" / "run_check.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _row(prompt: str, first: int | None, margin: float | None, near: bool) -> dict[str, Any]:
    return {
        "prompt": prompt,
        "same": first is None,
        "first_diff": first,
        "baseline_margin": margin,
        "near_tie": near,
    }


def _config(name: str, exit_code: int, **values: Any) -> dict[str, Any]:
    findings = values.pop("findings", [])
    return {
        "name": name,
        "what": name,
        "started": True,
        "smoke": {"exit": exit_code, "findings": findings},
        **values,
    }


def _data(**overrides: Any) -> dict[str, Any]:
    same = [_row(p, None, None, False) for p in ("a", "b")]
    configs = [
        _config("baseline", 0, lossless=True, drafter_accepts=None, vs_baseline="reference"),
        _config("random", 1, lossless=False, drafter_accepts=None, vs_baseline=[_row("a", 0, 6.1, False)]),
        _config(
            "ngram8", overrides.get("ngram_exit", 0), lossless=True, drafter_accepts=True, vs_baseline=same
        ),
        _config(
            "dflash8",
            1,
            lossless=True,
            drafter_accepts=False,
            vs_baseline=same,
            findings=["drafter_accepts_nothing"],
        ),
        _config(
            "standalone_k1",
            0,
            lossless=True,
            drafter_accepts=True,
            vs_baseline=[_row("a", 42, 0.08, True), _row("b", None, None, False)],
        ),
    ]
    return {"environment": {"date": "2026-12-03T09:00:00+00:00", "gpu": "NVIDIA H200"}, "configs": configs}


def test_every_rule_holds_on_a_run_that_meets_them() -> None:
    check = _module()
    results = {c["rule"]: c["holds"] for c in check.checks(_data()["configs"])}
    assert results == {
        "baseline exits 0": True,
        "random weights exit 1": True,
        "every lossless configuration whose drafter accepts exits 0": True,
        "a drafter that accepts nothing exits 1 and says so": True,
        "a divergence at a clear choice exits 1": True,
    }


def test_a_lossless_accepting_configuration_that_fails_breaks_its_rule() -> None:
    check = _module()
    results = {c["rule"]: c for c in check.checks(_data(ngram_exit=1)["configs"])}
    rule = results["every lossless configuration whose drafter accepts exits 0"]
    assert rule["holds"] is False and "ngram8 1" in rule["detail"]


def test_markdown_lists_every_configuration_and_the_near_tie() -> None:
    check = _module()
    data = _data()
    data["checks"] = check.checks(data["configs"])
    text = check.render(data)
    for name in ("baseline", "random", "ngram8", "dflash8", "standalone_k1"):
        assert f"| {name} |" in text
    assert "a@42 margin 0.080 (near tie)" in text
    assert "BROKEN" not in text


def test_an_answer_identical_alone_but_different_in_a_batch_is_not_lossless() -> None:
    check = _module()
    prompts = [p for p, _ in check.PROMPTS]
    reference = {p: {"ids": [1, 2, 3, 4], "margins": [2.0, 2.0, 2.0, 2.0]} for p in prompts}
    alone = {p: [1, 2, 3, 4] for p in prompts}
    batched = {**alone, prompts[1]: [1, 2, 9, 9]}  # a clear choice lost, only beside other requests
    alone_ok, _ = check.compare(alone, reference)
    batch_ok, rows = check.compare(batched, reference)
    assert alone_ok is True and batch_ok is False
    assert [r["first_diff"] for r in rows if not r["same"]] == [2]
    config = _config(
        "ngram16", 1, lossless=False, lossless_alone=True, lossless_batched=False, vs_baseline=[],
        vs_baseline_batched=rows,
    )  # fmt: skip
    assert check._lossless_cell(config) == "no: alone identical, in a batch of 8 1/6 differ"
