"""The GPU check's report side (scripts/gpu/run_check.py), on results shaped as a real run writes them:
the rules are evaluated from what was measured, and the Markdown shows every configuration."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.gpu_check.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]


def _module() -> ModuleType:
    return load_script("run_check")


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


def _sampled(
    exit_code: int, verdict: str, evidence: list[str], findings: list[str] | None = None
) -> dict[str, Any]:
    return {
        "exit": exit_code,
        "temperature": 0.7,
        "findings": findings if findings is not None else evidence,
        "rescoring": {"verdict": verdict, "evidence": evidence, "answers": 21, "tokens": 3000},
    }


def test_the_sampled_suite_is_the_lab_suite_sampled_only_and_loads(tmp_path: Path) -> None:
    from k26ctl.smoke import load_suite

    check = _module()
    text = check.sampled_suite(check._lab_suite_text(), 0.7)
    path = tmp_path / "lab-t0.7.yaml"
    path.write_text(text)
    suite = load_suite(str(path))
    lab = load_suite("lab")
    assert suite.name == "lab-t0.7" and not suite.determinism
    assert [p.id for p in suite.prompts] == [p.id for p in lab.prompts]
    assert {t for p in suite.prompts for t in suite.temperatures_for(p)} == {0.7}
    lab_text = check._lab_suite_text()
    with pytest.raises(ValueError, match="temperatures"):
        check.sampled_suite(lab_text.replace("temperatures:", "temps:"), 0.7)


def test_sampled_rules_lossless_pass_rescoring_and_random_fails_on_it() -> None:
    check = _module()
    data = _data()
    by = {c["name"]: c for c in data["configs"]}
    for name in ("baseline", "ngram8", "standalone_k1"):
        by[name]["smoke_sampled"] = _sampled(0, "pass", [])
    by["dflash8"]["smoke_sampled"] = _sampled(1, "skipped", [], ["drafter_accepts_nothing"])
    by["random"]["smoke_sampled"] = _sampled(
        1, "fail", ["rescore_surprise"], ["rescore_surprise", "gibberish"]
    )
    rules = {c["rule"]: c for c in check.checks(data["configs"])}
    lossless = rules["at temperature 0.7 every lossless configuration passes the rescoring probes"]
    assert lossless["holds"] is True and "not rescored: dflash8" in lossless["detail"]
    assert rules["at temperature 0.7 every lossless configuration whose drafter accepts exits 0"]["holds"]
    random = rules["at temperature 0.7 random weights fail on the rescoring evidence"]
    assert random["holds"] is True and "rescore_surprise" in random["detail"]
    data["checks"] = list(rules.values())
    text = check.render(data)
    assert "## Sampled pass: the lab suite at temperature 0.7" in text
    assert "| random | 1 | fail |" in text and "| gibberish |" in text
    # random weights sampled correctly from their own distribution pass the rescoring: the rule says so
    by["random"]["smoke_sampled"] = _sampled(1, "pass", [], ["gibberish"])
    by["ngram8"]["smoke_sampled"] = _sampled(1, "fail", ["rescore_departures"])
    rules = {c["rule"]: c for c in check.checks(data["configs"])}
    assert rules["at temperature 0.7 random weights fail on the rescoring evidence"]["holds"] is False
    assert (
        rules["at temperature 0.7 every lossless configuration passes the rescoring probes"]["holds"] is False
    )


def test_rescoring_summary_reads_a_smoke_report() -> None:
    check = _module()
    report = {
        "rescoring": {
            "verdict": "fail",
            "tokens": 10,
            "departures": 4,
            "answers": [{"z": -1.0}, {"z": -6.0}],
        },
        "results": [{"findings": [{"detector": "rescore_logprob_mismatch", "severity": "fail"}]}],
        "suite_findings": [
            {"detector": "rescore_departures", "severity": "fail"},
            {"detector": "rescoring_unflushed", "severity": "warn"},
        ],
    }
    summary = check.rescoring_summary(report)
    assert summary["verdict"] == "fail" and summary["answers"] == 2 and summary["min_answer_z"] == -6.0
    assert summary["evidence"] == ["rescore_departures", "rescore_logprob_mismatch"]
    assert check.rescoring_summary({}) is None
