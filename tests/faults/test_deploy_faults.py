"""Faults caused for real on a lab host while a real `k26ctl deploy` runs. Each ends in a clear message
and the documented exit code, and the host is read back afterwards (through ssh/nsenter, not through
k26ctl): the unit is the old one or the new one, byte for byte, nothing half-written is left, systemd
has loaded what is on disk, the service is in a known state, and the same deploy converges afterwards.
"""

from __future__ import annotations

import re
import time

import pytest

from .helpers import assert_clean_failure
from .scenario import Scenario

pytestmark = [pytest.mark.labhost, pytest.mark.timeout(180)]

# stderr lines (plain presenter, no TTY) that mark where the deploy is; the interrupt lands in the
# step that follows the line.
PHASES = {
    "connect": r"^\[ok\] validate",
    "facts": r"^\[ok\] lock",
    "unit-upload": r"^-> writing ",
    "daemon-reload": r"^-> systemctl daemon-reload",
    "restart": r"^-> restarting ",
    "readiness": r"^\[changed\] restart",
    "smoke": r"^\[ok\] readiness",
}


def _no_daemon_reload_pending(sc: Scenario) -> None:
    assert not sc.host.needs_daemon_reload(), "the unit on disk is not the one systemd has loaded"


@pytest.mark.parametrize("phase", list(PHASES))
def test_ctrl_c_at_each_phase(scenario: Scenario, phase: str) -> None:
    env = {"FAULT_LOAD_SECONDS": "3" if phase in ("readiness", "restart") else "0.3"}
    if phase == "smoke":
        env["FAULT_COMPLETION_DELAY"] = "1"  # a suite of about 2 s, so the signal lands inside it
    extra = ["--smoke"] if phase == "smoke" else ["--no-smoke"]
    for attempt in range(3):
        new = scenario.sets(f"sigint-{phase}-{attempt}", **env)
        running = scenario.start(new, *extra)
        line = running.wait_for(PHASES[phase], timeout=60)
        assert line is not None, f"phase marker for {phase} never appeared: {running.lines[-15:]}"
        running.interrupt()
        run = running.finish()
        if run.returncode != 0:
            break
        # The deploy finished before the signal arrived (a loaded machine): nothing was interrupted.
        scenario.establish_old()
    assert run.returncode == 130, (phase, run.stderr[-2000:])
    assert "Traceback" not in run.output
    # before apply it says the host was not touched; from apply on, which unit it left in place
    assert re.search(r"^error: interrupted[: ]", run.stderr, re.MULTILINE), run.stderr[-2000:]
    state = scenario.old_or_new(new, f"Ctrl-C during {phase}", run)
    if phase in ("connect", "facts"):
        assert state == "old", "interrupted before apply, yet the unit changed"
    if phase in ("daemon-reload", "restart", "readiness", "smoke"):
        assert state == "new", "interrupted after the unit was written, yet it is not there"
    _no_daemon_reload_pending(scenario)
    scenario.service_state()
    scenario.assert_recovers(new)


@pytest.mark.parametrize("gap", [0.02, 0.15])
def test_ctrl_c_twice(scenario: Scenario, gap: float) -> None:
    """People press Ctrl-C twice. The second one lands in the read-back of the unit (0.02 s) or in
    the exit after the message (0.15 s; a second SIGINT there used to kill the process by the signal,
    -2, instead of exit 130); neither changes the exit code or the account of the host."""
    new = scenario.sets(f"sigint-twice-{gap}", FAULT_LOAD_SECONDS="0.3", FAULT_COMPLETION_DELAY="1")
    running = scenario.start(new, "--smoke")
    assert running.wait_for(PHASES["smoke"], timeout=60) is not None, running.lines[-15:]
    running.interrupt()
    time.sleep(gap)
    running.interrupt()
    run = running.finish()
    assert run.returncode == 130, run.stderr[-2000:]
    assert "Traceback" not in run.output
    assert re.search(r"^error: interrupted: the new unit is in place ", run.stderr, re.MULTILINE), run.stderr
    assert scenario.old_or_new(new, "Ctrl-C twice", run) == "new"
    _no_daemon_reload_pending(scenario)
    scenario.assert_recovers(new)


def test_two_deploys_at_once(scenario: Scenario) -> None:
    first = scenario.sets("concurrent-a", FAULT_LOAD_SECONDS="4")
    second = scenario.sets("concurrent-b", FAULT_LOAD_SECONDS="4")
    a = scenario.start(first, "--no-smoke")
    b = scenario.start(second, "--no-smoke")
    run_a, run_b = a.finish(), b.finish()
    codes = sorted([run_a.returncode, run_b.returncode])
    assert codes == [0, 1], (run_a.stderr[-1500:], run_b.stderr[-1500:])
    _winner, loser, winner_sets = (run_a, run_b, first) if run_a.returncode == 0 else (run_b, run_a, second)
    assert_clean_failure(loser, (1,))
    assert "lock" in loser.stderr.lower(), loser.stderr
    assert scenario.old_or_new(winner_sets, "two deploys at once (the second)", loser) == "new"
    _no_daemon_reload_pending(scenario)
    assert scenario.host.wait_active() == "active"


def test_sshd_down(scenario: Scenario) -> None:
    new = scenario.sets("sshd-down")
    scenario.host.sshd("stop")
    run = scenario.deploy(new, "--no-smoke", timeout=60)
    scenario.host.sshd("start")
    assert_clean_failure(run, (69,))
    assert scenario.old_or_new(new, "sshd down", run) == "old"
    assert scenario.host.active_state() == "active"  # the old server kept running
    scenario.assert_recovers(new)


def test_host_key_changed(scenario: Scenario) -> None:
    new = scenario.sets("host-key")
    scenario.host.replace_host_key()
    try:
        run = scenario.deploy(new, "--no-smoke", timeout=60)
        again = scenario.deploy(new, "--no-smoke", "--accept-new-host-key", timeout=60)
    finally:
        scenario.host.restore_host_key()
    assert_clean_failure(run, (69,))
    assert "host key" in run.stderr.lower(), run.stderr
    # a changed key is never accepted, not even with the opt-in for unknown keys
    assert_clean_failure(again, (69,))
    assert scenario.old_or_new(new, "host key changed", run) == "old"
    scenario.assert_recovers(new)


def _wait_until_the_upload_lands(sc: Scenario) -> None:
    """Until the unit's temp file is on the host: the upload is under way (about 8 s more to go)."""
    deadline = time.monotonic() + 60  # generous: the deploy and the host share a busy machine
    while not sc.host.leftovers_in(sc.host.unit_dir):
        assert time.monotonic() < deadline, "the upload never reached the host"
        time.sleep(0.1)


@pytest.mark.parametrize("cut", ["kill-sessions", "link-down"])
def test_connection_cut_during_upload(scenario: Scenario, cut: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A unit padded to 48 KiB over a link shaped to 50 kbit/s takes about 8 s to upload, so the
    cut once its temp file is on the host falls inside the upload even on a loaded machine; the
    connection is cut in the middle of it (sshd's session killed: a reset; or the link taken down: a
    silent stall that only a timeout ends)."""
    monkeypatch.setenv("K26CTL_LOCK_LEASE", "3")  # a dead client's host lock frees itself within 3 s
    new = scenario.sets(f"cut-upload-{cut}", K26FAULTS_PAD="x" * 48 * 1024)
    with scenario.host.slow_link("50kbit"):
        running = scenario.start(new, "--no-smoke")
        assert running.wait_for(PHASES["unit-upload"], timeout=60) is not None, "\n".join(running.lines[-15:])
        _wait_until_the_upload_lands(scenario)
        if cut == "kill-sessions":
            assert scenario.host.kill_ssh_sessions() > 0
            run = running.finish(timeout=60)
        else:
            with scenario.host.link_down():
                run = running.finish(timeout=90)
            # the lost client's session is still open on the host; end it as TCP eventually would
            stale_lock = scenario.deploy(new, "--check", timeout=60)
            scenario.host.kill_ssh_sessions()
    assert_clean_failure(run, (69,))
    assert scenario.old_or_new(new, f"connection cut during upload ({cut})", run) == "old"
    _no_daemon_reload_pending(scenario)
    assert scenario.host.active_state() == "active"
    scenario.assert_recovers(new)
    error_lines = [line for line in run.stderr.splitlines() if line.startswith("error:")]
    assert len(error_lines) == 1
    # one line: the connection was lost, and what the host was left with (as far as known)
    assert "lost the connection" in error_lines[0], error_lines[0]
    assert "the service was not restarted" in error_lines[0], error_lines[0]
    if cut == "link-down":
        # the dead client's sshd session was still open, but its lock's lease had run out while the
        # link was down: the next deploy got the lock and found the change still pending (exit 3)
        assert re.search(r"^\[ok\] lock", stale_lock.stderr, re.MULTILINE), stale_lock.stderr[-2000:]
        assert stale_lock.returncode == 3, stale_lock.stderr[-2000:]


@pytest.mark.parametrize("cut", ["kill-sessions", "link-blip"])
def test_connection_cut_during_readiness_wait(scenario: Scenario, cut: str) -> None:
    new = scenario.sets(f"cut-ready-{cut}", FAULT_LOAD_SECONDS="4")
    running = scenario.start(new, "--no-smoke")
    assert running.wait_for(PHASES["readiness"], timeout=60) is not None, running.lines[-15:]
    if cut == "kill-sessions":
        assert scenario.host.kill_ssh_sessions() > 0
    else:
        with scenario.host.link_down():
            time.sleep(3)
    run = running.finish(timeout=90)
    # either k26ctl rides it out (a new connection) or it says the host was lost, and how it left it
    assert_clean_failure(run, (0, 69))
    if run.returncode == 69:
        assert re.search(r"^error: lost the connection .*the new unit is in place", run.stderr, re.M), (
            run.stderr
        )
    assert scenario.old_or_new(new, f"connection cut during readiness ({cut})", run) == "new"
    _no_daemon_reload_pending(scenario)
    assert scenario.host.wait_active() == "active"
    scenario.assert_recovers(new)


@pytest.mark.parametrize("mode", ["hang", "status500", "malformed"])
def test_health_endpoint_misbehaves(scenario: Scenario, mode: str) -> None:
    new = [*scenario.sets(f"health-{mode}", FAULT_MODE=mode), "readiness.timeout=4"]
    run = scenario.deploy(new, "--no-smoke", timeout=90)
    assert_clean_failure(run, (1,))
    assert "ready" in run.stderr.lower(), run.stderr[-2000:]
    assert scenario.old_or_new(new, f"health endpoint: {mode}", run) == "new"
    assert scenario.host.active_state() == "active"  # the process is up; it just never became ready
    scenario.assert_recovers(scenario.sets("health-recovered"))


def test_health_hang_with_rollback_restores_the_old_unit(scenario: Scenario) -> None:
    new = [*scenario.sets("health-hang-rollback", FAULT_MODE="hang"), "readiness.timeout=4"]
    run = scenario.deploy(new, "--no-smoke", "--rollback-on-failure", timeout=120)
    assert_clean_failure(run, (1,))
    assert "roll" in run.stderr.lower()
    assert scenario.old_or_new(new, "health hangs, --rollback-on-failure", run) == "old"
    _no_daemon_reload_pending(scenario)
    assert scenario.host.wait_active() == "active"


def test_crash_loop_reaches_the_start_limit(scenario: Scenario) -> None:
    new = [*scenario.sets("crash-loop", FAULT_MODE="crash"), "service.restart_sec=0"]
    run = scenario.deploy(new, "--no-smoke", timeout=90)
    assert_clean_failure(run, (1,))
    assert scenario.old_or_new(new, "crash loop (start limit)", run) == "new"
    deadline = time.monotonic() + 20
    while scenario.host.active_state() != "failed" and time.monotonic() < deadline:
        time.sleep(0.3)
    assert scenario.host.active_state() == "failed"
    journal = scenario.host.console("journalctl -u sglang.service --no-pager -n 30")
    assert "Start request repeated too quickly" in journal  # systemd's own start limit, for real
    # a unit stuck at its start limit must not wedge the next deploy
    scenario.assert_recovers(scenario.sets("crash-recovered"))
    if "fatal error while loading" not in run.output:
        pytest.xfail(
            "the report's journal lines stop before the server's own error line (the failure was seen "
            "as a restart first)"
        )


def test_disk_full_while_uploading(scenario: Scenario) -> None:
    new = scenario.sets("disk-full", K26FAULTS_PAD="y" * 8192)
    with scenario.host.tiny_unit_dir("4k"):
        run = scenario.deploy(new, "--no-smoke", timeout=60)
        assert_clean_failure(run, (1, 69, 77))
        assert run.returncode != 0
        assert "space" in run.stderr.lower(), run.stderr[-2000:]
        assert scenario.old_or_new(new, "disk full while uploading", run) == "old"
        _no_daemon_reload_pending(scenario)
    assert scenario.host.active_state() == "active"
    scenario.assert_recovers(new)


def test_server_dies_mid_smoke(scenario: Scenario) -> None:
    new = scenario.sets("die-mid-smoke", FAULT_MODE="die-after-1")
    run = scenario.deploy(new, "--smoke", timeout=90)
    assert_clean_failure(run, (1, 69))
    assert run.returncode != 0
    assert scenario.old_or_new(new, "server dies mid-smoke", run) == "new"
    scenario.service_state()
    scenario.assert_recovers(scenario.sets("die-recovered"))
