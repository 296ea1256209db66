"""`k26ctl watch` against the real lab server, with a real Prometheus scraping it.

The lab-only fault switch (K26LAB_FAULT_SWITCH) breaks the serving server without a restart; the
watcher must turn `failing` at the first step that starts after the switch (its cycle and the
immediate re-check), Prometheus must see the state and fire the shipped alert, and both must come back
to healthy when the switch is turned off."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch", reason="the lab server needs torch")

from k26ctl.lab.server.fault_switch import RuntimeFaults, write_switch
from k26ctl.watch.rules import RULES_FILE
from tests.support.lab_server import ROOT, lab_server
from tests.support.ports import free_port
from tests.support.prometheus import prometheus, prometheus_binary
from tests.support.watch_lines import WatchLines

pytestmark = pytest.mark.lab
INTERVAL = 3.0
SWITCH_LINE = "Lab fault switch: {"  # the server's line for each setting it takes


def _k26(args: list[str], state: Path, **kwargs: Any) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_STATE_HOME": str(state)}
    return subprocess.Popen([sys.executable, "-m", "k26ctl", *args], env=env, cwd=ROOT, text=True, **kwargs)


def _once(url: str, state: Path) -> tuple[int, dict[str, Any]]:
    proc = _k26(["watch", "--url", url, "--suite", "lab", "--once", "--json"], state,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    out, err = proc.communicate(timeout=300)
    lines = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert lines, err
    return proc.returncode, lines[-1]


def test_once_exits_0_on_a_healthy_lab_server_and_1_on_a_broken_one(tmp_path: Path) -> None:
    with lab_server("ddtree-b16-patched", patched=True) as server:
        code, record = _once(server.url, tmp_path / "state-ok")
    assert code == 0, record
    assert record["state"] == "healthy" and record["baseline_recorded"] is True
    assert record["evidence"]["probes"]["mismatches"] <= 3 and record["requests"] > 0
    with lab_server("ddtree-b16") as server:  # unpatched: the mask bug
        code, record = _once(server.url, tmp_path / "state-bad")
    assert code == 1, record
    assert record["state"] == "failing" and record["recheck_of"]["verdict"] == "failing"
    assert record["evidence"]["first_mismatch"]["position"] >= 0


def _switch(server: Any, switch: Path, faults: RuntimeFaults) -> float:
    """Flip the server's fault switch and wait for the server to say it took it (it polls the file
    every 0.2 s; a busy machine can make that longer than the gap between two watch cycles): the
    time.monotonic() from which a watch cycle is sure to see the new setting."""
    applied = server.log().count(SWITCH_LINE)
    write_switch(switch, faults)
    deadline = time.monotonic() + 60
    while server.log().count(SWITCH_LINE) <= applied:
        assert time.monotonic() < deadline, f"the server never took the switch:\n{server.log()[-2000:]}"
        time.sleep(0.05)
    return time.monotonic()


@contextmanager
def _watching(
    url: str, port: int, state: Path, textfile: Path
) -> Iterator[tuple[subprocess.Popen[str], WatchLines]]:
    args = ["watch", "--url", url, "--suite", "lab", "--interval", f"{INTERVAL:g}", "--json",
            "--metrics-port", str(port), "--textfile", str(textfile)]  # fmt: skip
    proc = _k26(args, state, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        yield proc, WatchLines(proc)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(120)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


@pytest.mark.skipif(
    prometheus_binary() is None, reason="prometheus is missing (bootstrap.sh --test installs it)"
)
def test_a_fault_switched_on_while_watching_fails_and_prometheus_alerts(tmp_path: Path) -> None:
    switch = tmp_path / "faults.json"
    metrics_port = free_port()
    textfile = tmp_path / "k26ctl_watch.prom"
    healthy_expr = 'k26ctl_watch_state{job="k26ctl-watch",state="healthy"}'
    failing_expr = 'k26ctl_watch_state{job="k26ctl-watch",state="failing"}'
    with (
        lab_server("ddtree-b16-patched", patched=True, env={"K26LAB_FAULT_SWITCH": str(switch)}) as server,
        _watching(server.url, metrics_port, tmp_path / "state", textfile) as (proc, lines),
        prometheus(tmp_path / "prom", [f"127.0.0.1:{metrics_port}"], [RULES_FILE]) as prom,
    ):
        lines.until("healthy")
        prom.wait_for(healthy_expr, 1.0)
        assert prom.value('up{job="k26ctl-watch"}') == 1.0
        labelled = 'k26ctl_watch_state{job="k26ctl-watch",state="healthy",model="k26lab-tiny",profile=""}'
        assert prom.value(labelled) == 1.0

        flipped = _switch(server, switch, RuntimeFaults(mask_bug=True))
        record, steps = lines.until("failing", after=flipped)
        to_failing = time.monotonic() - flipped
        # the step under way when the switch flipped, then the next one (a cycle and its re-check)
        assert steps <= 2, lines.seen[-steps:]
        assert record["changed"] and record["recheck_of"]["verdict"] == "failing"
        assert record["evidence"]["probes"]["mismatches"] > 3
        prom_failing = prom.wait_for(failing_expr, 1.0)
        firing: list[dict[str, Any]] = []
        deadline = time.monotonic() + 60
        while not firing and time.monotonic() < deadline:
            firing = [
                a
                for a in prom.alerts()
                if a["labels"]["alertname"] == "K26ServerFailing" and a["state"] == "firing"
            ]
            time.sleep(0.5)
        assert firing, prom.alerts()
        assert 'state="failing"} 1.0' in textfile.read_text()

        flipped = _switch(server, switch, RuntimeFaults())
        record, steps = lines.until("healthy", after=flipped)
        to_healthy = time.monotonic() - flipped
        assert steps <= 2 and record["changed"]
        prom.wait_for(healthy_expr, 1.0)
        assert prom.value(failing_expr) == 0.0
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
    history = (tmp_path / "state" / "k26ctl" / "watch").glob("*/history.jsonl")
    changes = [json.loads(line) for path in history for line in path.read_text().splitlines()]
    assert [(c["before"], c["after"]) for c in changes] == [
        ("unknown", "healthy"),
        ("healthy", "failing"),
        ("failing", "healthy"),
    ]
    assert (
        changes[1]["evidence"]["first_mismatch"]["expected"]
        != changes[1]["evidence"]["first_mismatch"]["got"]
    )
    print(
        f"interval {INTERVAL:g} s: failing {to_failing:.1f} s after the switch (Prometheus "
        f"{prom_failing:.1f} s later), healthy {to_healthy:.1f} s after it was turned off"
    )


@pytest.mark.skipif(
    prometheus_binary() is None, reason="prometheus is missing (bootstrap.sh --test installs it)"
)
def test_accept_length_near_one_on_a_drafter_meant_to_accept_sets_off_the_alert_rule(tmp_path: Path) -> None:
    """A DDTree server whose drafter proposes only what the target never picks (the stand-in's
    K26LAB_DRAFT_INVERTED, like a wrong draft model): the canary judges it failing (the drafter accepts
    nothing), the exported accept length sits at 1.0 beside `speculative_meant_to_accept 1`, and
    Prometheus starts
    K26DrafterAcceptsNothing (its 10-minute `for:` keeps it pending here; promtool's test in
    alerts_test.yml covers the firing)."""
    metrics_port = free_port()
    with (
        lab_server("ddtree-b7", env={"K26LAB_DRAFT_INVERTED": "1"}) as server,
        _watching(server.url, metrics_port, tmp_path / "state", tmp_path / "watch.prom") as (_proc, lines),
        prometheus(tmp_path / "prom", [f"127.0.0.1:{metrics_port}"], [RULES_FILE]) as prom,
    ):
        record, _ = lines.until("failing")
        assert record["evidence"]["first_failure"]["detector"] == "drafter_accepts_nothing"
        prom.wait_for('k26ctl_watch_speculative_meant_to_accept{job="k26ctl-watch"}', 1.0)
        accept = prom.value('k26ctl_watch_accept_length{job="k26ctl-watch"}')
        assert accept is not None and accept <= 1.05, accept
        pending: list[dict[str, Any]] = []
        deadline = time.monotonic() + 60
        while not pending and time.monotonic() < deadline:
            pending = [a for a in prom.alerts() if a["labels"]["alertname"] == "K26DrafterAcceptsNothing"]
            time.sleep(0.5)
        assert pending and pending[0]["state"] in ("pending", "firing"), prom.alerts()
        assert pending[0]["labels"]["model"] == "k26lab-tiny"
