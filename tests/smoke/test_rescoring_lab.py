"""The rescoring probes and the lossy-lever read-back against the real lab server: a relaxed-threshold
server is named in the verdict (a failure under strict), a DDTree server is asked for log-probabilities
only when told to, and the unpatched mask bug fails the rescoring at temperature 0.7."""

from __future__ import annotations

import pytest

pytest.importorskip("torch", reason="the lab server needs torch")

from k26ctl.smoke import SmokeOptions, SmokeTarget, load_suite, run_smoke
from k26ctl.smoke.runner import DDTREE_LOGPROB_NOTE
from k26ctl.smoke.suite import Suite
from tests.support.lab_server import lab_server

pytestmark = pytest.mark.lab


def _suite(seed: int = 7) -> Suite:
    base = load_suite("lab")
    prompts = [p for p in base.prompts if p.id in ("capital", "story", "bread")]
    return base.model_copy(update={"temperatures": [0.0, 0.7], "seed": seed, "prompts": prompts})


def test_relaxed_thresholds_are_read_back_and_rescoring_runs_only_when_asked() -> None:
    with lab_server("ddtree-b7-relaxed") as server:
        target = SmokeTarget(server.url)
        default = run_smoke(target, _suite(), options=SmokeOptions(concurrency=2))
        strict = run_smoke(target, _suite(), options=SmokeOptions(concurrency=2, lossless_strict=True))
        asked = run_smoke(target, _suite(), options=SmokeOptions(concurrency=2, rescoring=True))
    assert default.lossy_levers == [
        "--speculative-accept-threshold-single 0.3",
        "--speculative-accept-threshold-acc 0.1",
    ]
    (lossy,) = [f for f in default.suite_findings if f.detector == "lossy_by_design"]
    assert lossy.severity == "warn" and "/server_info" in lossy.message
    assert default.rescoring is not None and default.rescoring.verdict == "skipped"
    assert default.rescoring.note == DDTREE_LOGPROB_NOTE
    assert not strict.passed and any(
        f.detector == "lossy_by_design" for f in strict.suite_findings if f.severity == "fail"
    )
    assert asked.rescoring is not None and asked.rescoring.verdict != "skipped"
    assert asked.rescoring.tokens > 50 and all(a.diff_tokens == 0 for a in asked.rescoring.answers)


def test_the_unpatched_mask_bug_fails_the_rescoring_at_temperature_07() -> None:
    with lab_server("ddtree-b16") as server:
        report = run_smoke(
            SmokeTarget(server.url), _suite(), options=SmokeOptions(concurrency=2, rescoring=True)
        )
    assert report.rescoring is not None
    assert report.rescoring.verdict == "fail", report.rescoring.summary()
    found = {f.detector for f in report.suite_findings} | {
        f.detector for r in report.results for f in r.findings
    }
    assert found & {"rescore_logprob_mismatch", "rescore_unlikely_tokens", "rescore_surprise"}


def test_the_subtle_second_request_fault_fails_the_rescoring_at_temperature_07() -> None:
    """A runner-up within 4 logits committed by the second request of each verify pass: the rows are
    right (decode and rescore agree), the choices are not. Sampled only, greedy probes off, so the
    verdict is the rescoring's: departures from fairly sure top tokens, in the paired redraws."""
    suite = load_suite("lab").model_copy(update={"temperatures": [0.7], "seed": 41, "determinism": False})
    with lab_server("ddtree-b7-subtle") as server:
        report = run_smoke(
            SmokeTarget(server.url), suite, options=SmokeOptions(concurrency=2, probes=False, rescoring=True)
        )
    rescoring = report.rescoring
    assert rescoring is not None and rescoring.redrawn == 2 * len(suite.prompts)
    assert rescoring.verdict == "fail", rescoring.summary()
    assert rescoring.departure_tail < rescoring.rule.alpha, rescoring.summary()
    assert all(a.diff_tokens == 0 for a in rescoring.answers)
    assert "rescore_departures" in {f.detector for f in report.suite_findings}
