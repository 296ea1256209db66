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
    assert data["identity"]["model"] == "k26lab-tiny"
    assert data["identity"]["server_args"].get("speculative_algorithm") in (None, "NONE")
    outputs = {o["prompt_id"]: o for o in data["outputs"]}
    assert "Paris" in outputs["capital"]["text"]
    assert outputs["capital"]["reasoning"]  # thinking was on for this prompt
    assert len(outputs["long-bees"]["text"]) >= 256


def test_unpatched_ddtree_b16_fails_with_named_findings_and_accept_collapse(tmp_path: Path) -> None:
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
    assert "accept_collapse" in detectors
    accepts = [r["accept_length"] for r in report["results"] if r["accept_length"] is not None]
    assert accepts and max(accepts) < 2.75
    suite_findings = {f["detector"] for f in report["suite_findings"]}
    assert "measured_accept_collapse" in suite_findings
    assert report["accept_length"] < 2.0
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
    assert {f.detector for r in report.results for f in r.findings} & {
        "nondeterministic",
        "non_words",
        "accept_collapse",
    }
