"""Every SGLang-facing path of k26ctl against the real SGLang releases on a lab host (CPU, tiny model).

One host for the session (conftest.real_host) and one server at a time. A real start costs a minute or
more of CPU on two cores, so the tests run in file order and each leaves what the next can use: the
first deploy's trained server serves the watcher; one deploy changes the weights and a flag and its
rollback brings the trained server back; the bisect search starts from it (its good end needs no
restart) and its reset puts it back; the start-up failures and 0.5.23 come last
(test_stand_in_differential.py, after this file, deploys the trained server once more). A test that
needs a state it cannot assume brings the server there first.
"""

from __future__ import annotations

import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from k26ctl.deploy import deploy
from k26ctl.deploy.model import DeployEvent, DeployOptions
from k26ctl.fleet.members import read_worker_load
from k26ctl.profile import load_profile
from tests.support.cli import run_k26ctl, spawn_k26ctl
from tests.support.hosts import state_env_with_lab_hosts
from tests.support.watch_lines import WatchLines

from .realserver import (
    GARBAGE,
    GARBAGE_PATH,
    GOOD,
    NEWER,
    QUICK,
    TRAINED_PATH,
    BusyServer,
    k26_json,
    running_requests,
    server_info,
    sets,
    swap_weights,
    url,
)

pytestmark = [pytest.mark.realsglang, pytest.mark.labhost, pytest.mark.lab, pytest.mark.timeout(1800)]

READY_LINE = "The server is fired up and ready to roll!"


def _doctor_matches(host: Any, profile: str, version: str) -> None:
    """`k26ctl doctor` on the real server: what k26ctl reads is there, as the inventory says."""
    code, doc = k26_json("doctor", profile, *sets(host))
    rows = {(r["area"], r["item"]): r for r in doc["rows"]}
    assert code == 0, [r for r in doc["rows"] if r["status"] in ("unreadable", "error")]
    assert rows[("sglang", "version")]["status"] == "match" and version in rows[("sglang", "version")]["seen"]
    for key in (("journal", "ready"), ("journal", "load-progress"), ("journal", "load-weight-end"),
                ("http", "/server_info"), ("http", "server_info keys"), ("http", "/v1/models"),
                ("http", "/metrics")):  # fmt: skip
        assert rows[key]["status"] == "match", rows[key]


def _ensure_good(host: Any) -> None:
    code, doc = k26_json("deploy", GOOD, *sets(host), "--yes")
    assert code == 0, doc


def test_first_deploy_readiness_smoke_probes_then_idempotent_check_diff_status_logs_flush(
    real_host: Any,
) -> None:
    # first deploy, through the API to see the events the CLI presents
    events: list[DeployEvent] = []
    loaded = load_profile(GOOD, [f"host.lab={real_host.name}"])
    result = deploy(loaded, DeployOptions(yes=True, smoke=True, force=True), on_event=events.append)
    assert result.exit_code == 0, (result.message, result.journal_lines)
    assert result.restarted  # forced: the host may already run this profile (a reused host)
    assert result.smoke is not None and result.smoke.passed, result.smoke.summary() if result.smoke else None
    # readiness read the real journal: SGLang's own load time and its (single-record) tqdm bar
    assert result.load_seconds is not None and result.load_seconds > 0
    progress = [e.data for e in events if e.kind == "progress"]
    assert progress and progress[-1].get("percent") == 100, progress
    identity = result.smoke.server_identity
    assert identity["version"] == "0.5.15"
    probes = result.smoke.probes
    assert probes is not None and probes.checked > 0 and not probes.mismatches and probes.flushed
    # where the restart's time went, from the real journal (deploy/phases.py)
    phases = result.phases
    assert phases is not None and phases.ready and phases.wording == "0.5.15", phases
    names = [p.name for p in phases.phases]
    assert {"imports", "launch", "distributed", "weights", "kv-cache", "warmup"} <= set(names), names
    assert abs(phases.start_seconds - (result.load_seconds or 0)) < 1.0  # the same journal, the same span

    # nothing changed: no restart
    code, doc = k26_json("deploy", GOOD, *sets(real_host), "--yes")
    assert code == 0 and doc["changed"] is False and doc["restarted"] is False, doc

    # --check / --diff with a changed flag: exit 3, the flag in the diff, nothing applied
    proc = run_k26ctl("deploy", GOOD, *sets(real_host, "sglang.max_running_requests=4"), "--check", "--diff")
    assert proc.returncode == 3, proc.output
    assert re.search(r"expected downtime \(stop -> ready\) \d+ s.*earlier restart", proc.output), proc.output
    assert "+    --max-running-requests 4" in proc.output, proc.output
    assert server_info(real_host)["max_running_requests"] == 8

    # status: running, the unit matches; against a changed profile it does not (drift)
    code, doc = k26_json("status", GOOD, *sets(real_host))
    assert code == 0, doc
    assert doc["unit_matches_profile"] is True and doc["ready"] is True, doc
    restart = [r for r in doc["history"] if r.get("phases")][-1]  # the forced deploy's record
    assert restart["sglang_version"] == "0.5.15" and restart["phases"]["ready"], restart
    assert restart["start_conditions"]["jit_cache"] in ("warm", "cold"), restart["start_conditions"]
    assert doc["service"]["ActiveState"] == "active", doc["service"]
    code, doc = k26_json("status", GOOD, *sets(real_host, "sglang.max_running_requests=4"))
    assert doc["unit_matches_profile"] is False, doc

    # logs: the real server's own lines
    proc = run_k26ctl("logs", GOOD, *sets(real_host), "-n", "400", timeout=120)
    assert proc.returncode == 0, proc.output
    assert READY_LINE in proc.stdout and "sglang" in proc.stdout.lower()

    # /flush_cache: 200 idle; 400 while a request runs; smoke during that run reports the refused flush
    assert httpx.post(url(real_host, "/flush_cache"), timeout=30).status_code == 200
    with BusyServer(real_host) as busy:  # within the 2048 context
        refused = httpx.post(url(real_host, "/flush_cache"), timeout=30)
        assert refused.status_code == 400 and "Flush cache failed" in refused.text, refused.text
        assert read_worker_load(url(real_host, "")) >= 1  # what a fleet drain reads: 0.5.15's /get_load
        code, doc = k26_json("smoke", GOOD, *sets(real_host), "--set", f"smoke.suite={QUICK}")
    assert not busy.errors and set(busy.statuses) <= {200}, (busy.errors, busy.statuses)  # aborts end in 200
    assert doc["probes"]["flushed"] is False, doc["probes"]
    assert any(f["detector"] == "probes_unflushed" for f in doc["suite_findings"]), doc["suite_findings"]

    # the Must-show: smoke --json on the idle server
    code, doc = k26_json("smoke", GOOD, *sets(real_host))
    assert code == 0, doc["summary"]
    assert doc["server"]["version"] == "0.5.15"
    assert doc["probes"]["checked"] > 0 and doc["probes"]["mismatches"] == 0, doc["probes"]
    assert running_requests(real_host) == 0 and read_worker_load(url(real_host, "")) == 0
    # 0.5.15's load endpoints (0.5.23 has /v1/loads instead: the last test)
    assert httpx.get(url(real_host, "/get_load"), timeout=30).status_code == 200
    assert httpx.get(url(real_host, "/v1/loads"), timeout=30).status_code >= 400
    _doctor_matches(real_host, GOOD, "0.5.15")


def test_a_running_watcher_turns_failing_when_the_weights_are_swapped_in_place_then_healthy_again(
    real_host: Any,
) -> None:
    """No deploy and no restart: SGLang's own /update_weights_from_disk (it works on CPU) swaps the
    serving weights for the untrained twin's behind the watcher's back, then back again."""
    _ensure_good(real_host)
    good_path = server_info(real_host)["model_path"]
    watcher = spawn_k26ctl(
        "watch", GOOD, *sets(real_host), "--interval", "10", "--json", "--rebaseline",
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    lines = WatchLines(watcher)
    try:
        healthy, _ = lines.until("healthy", timeout=300)
        assert healthy["baseline_recorded"] is True and healthy["requests"] > 0, healthy
        swap_weights(real_host, GARBAGE_PATH)
        assert httpx.get(url(real_host, "/health"), timeout=60).status_code == 200
        failing, _ = lines.until("failing", timeout=300)
        assert failing["recheck_of"]["verdict"] == "failing" and failing["reasons"], failing
        swap_weights(real_host, good_path)
        lines.until("healthy", timeout=300)
    finally:
        swap_weights(real_host, good_path)  # whatever happened, the next test gets the trained weights
        watcher.send_signal(signal.SIGINT)
        try:
            watcher.wait(60)
        except subprocess.TimeoutExpired:
            watcher.kill()
    states = [record.get("state") for record in lines.seen]
    assert states.index("healthy") < states.index("failing") < len(states) - 1, states
    assert states[-1] == "healthy", states

    # SGLang renames the served model to the new path on a swap: a deploy that changes nothing must say
    # so at once (not wait out readiness.timeout for a name that will not come back)
    served = [card["id"] for card in httpx.get(url(real_host, "/v1/models"), timeout=30).json()["data"]]
    assert served == [good_path], served
    started = time.monotonic()
    code, doc = k26_json("deploy", GOOD, *sets(real_host), "--yes")
    assert code == 1 and doc["failure"] == "readiness" and doc["restarted"] is False, doc
    assert "does not serve the profile's model" in doc["message"] and good_path in doc["message"], doc
    assert time.monotonic() - started < 120, "waited for the name instead of failing on it"
    # (the next test deploys the untrained model: a changed unit, so a restart; its rollback brings back
    # the trained one under its own name)


def test_untrained_weights_with_a_changed_flag_restart_answer_health_200_fail_smoke_then_rollback(
    real_host: Any,
) -> None:
    """One deploy changes two keys from the trained server the tests before left: the weights (the
    untrained twin) and max_running_requests. The real server restarts, takes both, is ready with
    /health 200 and talks garbage, which smoke fails; rollback restores the unit before the change."""
    change = sets(real_host, GARBAGE, "sglang.max_running_requests=4")
    code, doc = k26_json("deploy", GOOD, *change, "--yes", "--smoke")
    assert code == 1 and doc["failure"] == "smoke", doc
    assert doc["restarted"], doc
    assert any(s["name"] == "readiness" and s["status"] == "ok" for s in doc["steps"]), doc["steps"]
    assert doc["smoke"]["health_after"] == 200
    assert doc["smoke"]["passed"] is False
    detectors = {f["detector"] for r in doc["smoke"]["results"] for f in r.get("findings", [])}
    assert detectors, doc["smoke"]["summary"]
    assert "/health=200" in doc["smoke"]["summary"]
    info = server_info(real_host)  # the real server took both new values
    assert info["max_running_requests"] == 4 and info["model_path"] == GARBAGE_PATH, info
    # the old server's end: SGLang drains on SIGTERM, then SIGKILLs itself (the stand-in does the same:
    # tests/deploy/test_deploy_lab.py asks its journal the same question)
    proc = run_k26ctl("logs", GOOD, *sets(real_host), "-n", "2000", timeout=120)
    assert "SIGTERM received" in proc.stdout and "Draining requests and shutting down" in proc.stdout
    assert "code=killed, status=9/KILL" in proc.stdout, proc.stdout[-3000:]

    code, doc = k26_json("rollback", GOOD, *sets(real_host), "--yes")
    assert code == 0 and doc["restarted"], doc
    info = server_info(real_host)
    assert info["max_running_requests"] == 8 and info["model_path"] == TRAINED_PATH, info
    code, doc = k26_json("status", GOOD, *sets(real_host))
    assert doc["unit_matches_profile"] is True and doc["ready"] is True, doc
    restart = [r for r in doc["history"] if r.get("phases")][-1]  # the forced deploy's record
    assert restart["sglang_version"] == "0.5.15" and restart["phases"]["ready"], restart
    assert restart["start_conditions"]["jit_cache"] in ("warm", "cold"), restart["start_conditions"]


def test_bisect_between_the_good_and_the_untrained_profile_names_the_weights_then_reset(
    real_host: Any, tmp_path: Path
) -> None:
    """Set mode on the real server. The bad profile differs from the good one in two keys, the weights
    (untrained) and a harmless max_running_requests; each step deploys a subset and smoke judges it.
    The trained server the test before left is the good end as it is (no restart to verify it); `reset`
    puts it back after the search."""
    bad = tmp_path / "two-changes.yaml"
    bad.write_text(
        f"extends: {GOOD}\nname: k26real-two-changes\n"
        f"sglang:\n  model_path: {GARBAGE_PATH}\n  max_running_requests: 4\n"
    )
    state = state_env_with_lab_hosts(tmp_path)
    started = time.monotonic()
    code, doc = k26_json(
        "bisect-config",
        "--good-profile",
        GOOD,
        "--bad-profile",
        str(bad),
        *sets(real_host),
        "--yes",
        timeout=1500,
        env=state,
    )
    assert code == 0, doc
    assert sorted(doc["changed_keys"]) == ["sglang.max_running_requests", "sglang.model_path"], doc
    assert doc["culprit_keys"] == ["sglang.model_path"], doc
    print(f"\nreal set search: {doc['restarts']} restarts, {time.monotonic() - started:.0f} s")
    reset = run_k26ctl("bisect-config", "reset", "--yes", env=state, timeout=900)
    assert reset.returncode == 0, reset.output[-2000:]
    info = server_info(real_host)
    assert info["model_path"] == TRAINED_PATH and info["max_running_requests"] == 8, info


def test_start_up_failures_are_caught_from_the_real_server(real_host: Any) -> None:
    # a value the real argument parser refuses: its error line from the journal, on the process's exit
    bad_value = "sglang.extra_args=[--device, cpu, --max-total-tokens, lots]"
    started = time.monotonic()
    code, doc = k26_json("deploy", GOOD, *sets(real_host, bad_value), "--yes")
    took = time.monotonic() - started
    assert code == 1 and doc["failure"] == "readiness", doc
    # the exit as systemd's unit state or as its journal line has it, whichever readiness saw first
    assert re.search(r"exited.*status[ =]2\b", doc["message"]), doc["message"]
    parser_error = [line for line in doc["journal_lines"] if "error: argument --max-total-tokens" in line]
    assert parser_error and "'lots'" in parser_error[0], doc["journal_lines"]
    assert took < 300, took  # failed on the exit, not on readiness.timeout

    # a served name SGLang's start-up refuses (':' in it): k26ctl's own rule refuses it, changing nothing
    refused = run_k26ctl("deploy", GOOD, *sets(real_host, "sglang.served_model_name=k26:tiny"), "--yes")
    assert refused.returncode == 78 and "served-name-colon" in refused.stderr, refused

    # a model path that is not a model: the real loader's traceback
    code, doc = k26_json("deploy", GOOD, *sets(real_host, "sglang.model_path=/opt/sglang/cpu-ops"), "--yes")
    assert code == 1 and doc["failure"] == "readiness", doc
    journal = "\n".join(doc["journal_lines"])
    assert "Traceback (most recent call last):" in journal, journal
    assert "/opt/sglang/cpu-ops" in journal, journal


def test_release_0523_serves_with_the_cpu_ops_and_its_load_endpoints_differ(real_host: Any) -> None:
    if "0.5.23" not in real_host.real_sglang:
        pytest.skip("real SGLang 0.5.23 not installed: run `bash scripts/bootstrap.sh --real-sglang`")
    # from whatever the test before left (0.5.15's /get_load and missing /v1/loads: the first test)
    code, doc = k26_json("deploy", NEWER, *sets(real_host), "--yes", "--smoke")
    assert code == 0, doc.get("message") or doc
    assert doc["smoke"]["server"]["version"] == "0.5.23"
    assert doc["smoke"]["probes"]["checked"] > 0 and doc["smoke"]["probes"]["mismatches"] == 0
    assert httpx.get(url(real_host, "/get_load"), timeout=30).status_code == 404  # removed in 0.5.23
    assert httpx.get(url(real_host, "/v1/loads"), timeout=30).status_code == 200
    metrics = httpx.get(url(real_host, "/metrics"), timeout=30).text
    assert "sglang:num_running_reqs" in metrics and "sglang:num_queue_reqs" in metrics
    # a fleet drain reads 0.5.23's load from /metrics: busy at least the request in flight, then 0
    with BusyServer(real_host, tokens=(1500,)):
        assert read_worker_load(url(real_host, "")) >= 1
    deadline = time.monotonic() + 120  # the gauge follows the scheduler's next step
    while read_worker_load(url(real_host, "")) != 0:
        assert time.monotonic() < deadline, "0.5.23's /metrics never showed the server idle"
        time.sleep(0.5)
    _doctor_matches(real_host, NEWER, "0.5.23")
