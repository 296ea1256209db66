"""End to end against the real lab server (python -m k26ctl.lab.serve, torch on the CPU).

The servers are started from the shipped lab profiles (argv rendered by k26ctl) on 127.0.0.1; the
patched configuration runs over a copy of the lab tree patched by k26ctl's own patch engine. The
smoke command runs as a subprocess, as a user would run it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("torch", reason="the lab server needs torch")

from tests.support.cli import run_k26ctl, spawn_k26ctl
from tests.support.lab_server import LabServer, lab_server

pytestmark = pytest.mark.lab

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def none_baseline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Greedy outputs of the plain (NONE) lab server, recorded with `--record-baseline`."""
    path = tmp_path_factory.mktemp("baseline") / "none.json"
    with lab_server("none") as server:
        done = run_k26ctl(
            "smoke",
            "--url",
            server.url,
            "--suite",
            "lab",
            "--record-baseline",
            str(path),
            "--json",
            timeout=180,
        )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    yield path


def test_none_baseline_records_the_server_identity(none_baseline: Path) -> None:
    data = json.loads(none_baseline.read_text())
    # recorded by token ids with return_logprob/top_logprobs_num 2: every output token's top-2 margin
    for output in data["outputs"]:
        assert output["output_ids"] and len(output["margins"]) == len(output["output_ids"])
        assert all(m is None or m >= 0 for m in output["margins"])
    assert data["identity"]["model"] == "k26lab-tiny"
    assert data["identity"]["server_args"].get("speculative_algorithm") in (None, "NONE")
    outputs = {o["prompt_id"]: o for o in data["outputs"]}
    assert "Paris" in outputs["capital"]["text"]
    assert outputs["capital"]["reasoning"]  # thinking was on for this prompt
    assert len(outputs["long-bees"]["text"]) >= 256


def test_unpatched_ddtree_b16_fails_with_named_findings_and_low_acceptance(tmp_path: Path) -> None:
    junit = tmp_path / "smoke.xml"
    with lab_server("ddtree-b16") as server:
        health = httpx.get(server.url + "/health", timeout=30, trust_env=False).status_code
        done = run_k26ctl(
            "smoke",
            "--url",
            server.url,
            "--suite",
            "lab",
            "--json",
            "--junit",
            str(junit),
            "--min-accept-length",
            "2.5",
            timeout=180,
        )
    assert health == 200  # /health is happy while the answers are garbage
    assert done.returncode == 1, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["passed"] is False
    detectors = {f["detector"] for r in report["results"] for f in r["findings"]}
    # the degenerate text is named, not just "failed"
    assert detectors & {"char_run", "non_words", "repetition", "tail_compression", "reasoning.char_run"}
    accepts = [r["accept_length"] for r in report["results"] if r["accept_length"] is not None]
    assert accepts and max(accepts) < 2.75
    # the user's floor (--min-accept-length 2.5) fails it; the detectors and probes do too
    suite_findings = {f["detector"] for f in report["suite_findings"]}
    assert "measured_accept_floor" in suite_findings
    assert report["accept_length"] < 2.0
    assert report["accept_rule"]["algorithm"] == "DDTREE" and report["accept_rule"]["longest"]
    # the probes see the verify bug from the first tokens on
    assert report["probes"]["flushed"] is True
    assert report["probes"]["mismatches"] > 10
    assert report["probes"]["first_mismatch"]["position"] < 8
    assert junit.read_text().count("<failure") >= 1
    assert "smoke FAILED" in done.stderr


def test_patched_ddtree_b16_passes_with_parity_against_none(none_baseline: Path, tmp_path: Path) -> None:
    """Through the PROFILE path: the patched lab profile, pointed at this machine (host.address local)."""
    with lab_server("ddtree-b16-patched", patched=True) as server:
        port = server.url.rsplit(":", 1)[1]
        done = run_k26ctl(
            "smoke",
            str(ROOT / "profiles" / "lab" / "ddtree-b16-patched.yaml"),
            "--set",
            "host.lab=null",
            "--set",
            "host.address=local",
            "--set",
            f"sglang.port={port}",
            "--suite",
            "lab",
            "--baseline",
            str(none_baseline),
            "--json",
            timeout=180,
        )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert report["passed"] is True
    assert report["baseline"]["exact_match_rate"] == 1.0
    assert all(p["match"] for p in report["baseline"]["prompts"])
    accepts = [r["accept_length"] for r in report["results"] if r["accept_length"] is not None]
    assert accepts and min(accepts) >= 2.5  # the profile's smoke.min_accept_length floor
    assert report["min_accept_length"] == 2.5
    assert report["concurrency"] >= 2


def _run_and_kill(server: LabServer, args: list[str]) -> tuple[int, str, str]:
    proc = spawn_k26ctl(*args)
    assert proc.stderr is not None
    seen: list[str] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        seen.append(line)
        if ": ok" in line or ": FAIL" in line:  # the first answer is in: the server dies now
            server.kill()
            break
    out, err = proc.communicate(timeout=120)
    return proc.returncode, out, "".join(seen) + err


def test_server_dying_mid_suite_exits_69() -> None:
    with lab_server("none") as server:
        code, _out, err = _run_and_kill(server, ["smoke", "--url", server.url, "--suite", "lab"])
    assert code == 69, err[-3000:]
    assert "stopped answering during the suite" in err
    assert "Traceback" not in err


def test_mask_only_variant_needs_two_requests_in_flight(none_baseline: Path) -> None:
    """K26LAB_BUG_SCOPE=mask-only corrupts only the second request of a batch: one request at a time
    matches the NONE baseline exactly, the suite (2 in flight) fails."""
    from k26ctl.smoke import SmokeOptions, SmokeTarget, load_suite, run_smoke
    from k26ctl.smoke.client import SGLangClient

    baseline = {o["prompt_id"]: o["text"] for o in json.loads(none_baseline.read_text())["outputs"]}
    suite = load_suite("lab")
    raw = [p for p in suite.prompts if p.api == "generate"]
    with lab_server(
        "ddtree-b16", env={"K26LAB_BUG_SCOPE": "mask-only", "K26LAB_UNVISITED": "stale"}
    ) as server:
        with SGLangClient(server.url) as client:
            alone = {
                p.id: client.generate(p.prompt or "", temperature=0, max_new_tokens=p.max_tokens).text
                for p in raw
            }
        report = run_smoke(SmokeTarget(server.url), suite, options=SmokeOptions(concurrency=2))
    assert alone == {p.id: baseline[p.id] for p in raw}
    assert not report.passed
    assert {f.detector for r in report.results for f in r.failures} & {"nondeterministic", "non_words"}


def _smoke_json(
    server: LabServer, *extra: str, env: dict[str, str] | None = None
) -> tuple[int, dict[str, Any], str]:
    done = run_k26ctl("smoke", "--url", server.url, "--suite", "lab", "--json", *extra, env=env, timeout=400)
    assert done.stdout.strip(), f"exit {done.returncode}: {done.stderr[-3000:]}"
    return done.returncode, json.loads(done.stdout), done.stderr


def test_lossless_server_with_a_weak_drafter_passes_with_a_low_acceptance_warning(
    none_baseline: Path, tmp_path: Path
) -> None:
    """Slow is not broken: DFlash over an order-1 n-gram drafter accepts ~1.5 of a block of 8 (the old
    rule failed anything under 2.75) and reproduces the plain server's greedy output exactly."""
    env = {"XDG_STATE_HOME": str(tmp_path / "state")}
    with lab_server("dflash-weak") as server:
        code, report, stderr = _smoke_json(server, "--baseline", str(none_baseline), env=env)
    assert code == 0, report["summary"]
    assert 1.05 < report["accept_length"] < 2.75
    low = [f for f in report["suite_findings"] if f["detector"] == "measured_accept_low"]
    assert len(low) == 1 and low[0]["severity"] == "warn"
    assert f"{report['accept_length']:.2f}" in low[0]["message"] and "up to 8" in low[0]["message"]
    assert "warnings=measured_accept_low" in report["summary"] and "smoke PASSED" in stderr
    assert report["baseline"]["exact_match_rate"] == 1.0
    assert report["probes"]["mismatches"] == 0
    # the pass is remembered for this URL and configuration (a later collapse is judged against it)
    memory = json.loads((tmp_path / "state" / "k26ctl" / "smoke-accept.json").read_text())
    assert [e["speculative_algorithm"] for e in memory.values()] == ["DFLASH"]


def test_near_tie_divergence_is_tolerated_and_a_clear_one_fails(none_baseline: Path) -> None:
    """Against the plain server's baseline (recorded with its top-2 log-probabilities): argmax flips
    at near ties (K26LAB_NEAR_TIE_*: gap under 0.2) pass with a named warning; the second-request
    verify fault, which commits runner-ups up to 4 logits behind, fails at a clear choice."""
    ties = {"K26LAB_NEAR_TIE_RATE": "1", "K26LAB_NEAR_TIE_GAP": "0.2"}
    with lab_server("dflash-weak", env=ties) as server:
        code, report, _ = _smoke_json(server, "--baseline", str(none_baseline), "--no-probes")
    baseline = report["baseline"]
    assert code == 0, report["summary"]
    assert baseline["near_ties"], "the lab's near-tie flips changed no answer"
    tied = [p for p in baseline["prompts"] if p["near_tie"]]
    assert all(p["baseline_margin"] <= 0.2 + 1e-3 and p["first_token"] is not None for p in tied)
    assert any(f["detector"] == "baseline_near_tie" for f in report["suite_findings"])

    fault = {"K26LAB_VERIFY_FAULT": "second-request", "K26LAB_FAULT_GAP": "4"}
    with lab_server("dflash-weak", env=fault) as server:
        code, report, _ = _smoke_json(server, "--baseline", str(none_baseline), "--no-probes")
    assert code == 1
    clear = [
        p for p in report["baseline"]["prompts"] if p["baseline_margin"] is not None and not p["near_tie"]
    ]
    assert clear and all(p["baseline_margin"] > 0.25 for p in clear)
    assert any(f["detector"] == "baseline_clear_divergence" for f in report["suite_findings"])
