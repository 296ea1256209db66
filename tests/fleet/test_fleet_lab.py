"""Rolling deploys on the real lab: 3 lab hosts (systemd + sshd in nspawn, the lab server) behind the
real sglang-router, one fleet for the whole module, load through the router during every roll."""

from __future__ import annotations

import contextlib
import json
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from k26ctl.fleet.record import LocalStore
from tests.support.cli import run_k26ctl, spawn_k26ctl
from tests.support.fleet_roll import Load, listed
from tests.support.fleet_roll import roll as roll_fleet
from tests.support.hosts import lab_host_name

QUICK_SUITE = Path(__file__).resolve().parents[1] / "deploy" / "data" / "quick-suite.yaml"

pytestmark = [pytest.mark.labhost, pytest.mark.lab, pytest.mark.timeout(900)]
PATCHED = ["--set", "spec.ddtree.budget=16", "--set", "patches=[triton-ddtree-verify-width]"]
UNPATCHED = ["--set", "spec.ddtree.budget=16", "--set", "patches=[]"]
QUICK = ["--set", f"smoke.suite={QUICK_SUITE}"]


@pytest.fixture(scope="module")
def fleet() -> Iterator[Any]:
    from k26ctl.lab.host import prerequisite_problem

    reason = prerequisite_problem()
    if reason:
        pytest.skip(f"lab host unavailable: {reason}")
    pytest.importorskip("sglang_router")
    from k26ctl.lab.fleet import lab_fleet_down, lab_fleet_up

    name = lab_host_name() + "f"
    lab_fleet_down(name)  # a run killed earlier
    state = lab_fleet_up(name, 3)
    try:
        yield state
    finally:
        lab_fleet_down(name)


def roll(fleet: Any, *args: str) -> tuple[int, dict[str, Any], str]:
    return roll_fleet(fleet, *args, *QUICK)


def test_rolling_budget_7_to_patched_16_under_load_fails_no_request(fleet: Any) -> None:
    t0 = time.time()
    with Load(fleet) as load:
        started = time.time()
        code, doc, err = roll(fleet, *PATCHED)
        ended = time.time()
    assert code == 0, (doc, err)
    assert doc["status"] == "done" and doc["order"] == fleet.hosts  # canary first, then one at a time
    assert {m["where"] for m in doc["members"].values()} == {"new config, serving"}
    assert load.report is not None
    total = load.report.summary(load.report.samples)
    during = load.report.summary(load.report.select(started, ended))
    outside = load.report.summary(load.report.select(started, ended, inside=False))
    print(f"\nload during the roll: {during}\nload outside the roll: {outside}\nroll {ended - started:.1f}s")
    assert total["sent"] >= 200 and during["sent"] > 0 and outside["sent"] > 0
    assert total["failed"] == 0 and total["degenerate"] == 0, load.report.to_json()
    assert set(listed(fleet)) == set(fleet.urls) and all(listed(fleet).values())
    assert t0 <= started


def test_rolling_to_unpatched_16_halts_at_the_canary_and_clients_never_see_degenerate_text(
    fleet: Any,
) -> None:
    canary, *others = fleet.hosts
    with Load(fleet) as load:
        code, doc, err = roll(fleet, *UNPATCHED)
    assert code == 1 and doc["status"] == "halted", (doc, err)
    assert doc["order"][0] == canary and doc["reason"].startswith(f"canary {canary} failed")
    assert "smoke" in doc["members"][canary]["detail"]
    assert doc["members"][canary]["where"] == "failed, out of router (new config)"
    assert all(doc["members"][o]["where"] == "old config, serving" for o in others)
    # the router sends traffic to the two others only, and they still run the patched budget 16
    assert set(listed(fleet)) == set(fleet.urls[1:])
    for other in others:
        check = run_k26ctl("deploy", fleet.fleet_file, *PATCHED, "--check", "--json", timeout=600)
        assert json.loads(check.stdout)["members"][other]["exit_code"] == 0
    assert load.report is not None
    summary = load.report.summary(load.report.samples)
    assert summary["sent"] > 0 and summary["degenerate"] == 0 and summary["failed"] == 0, (
        load.report.to_json()
    )
    # a new roll is refused until the halted one is resumed: the canary stays out meanwhile
    refused = run_k26ctl("deploy", fleet.fleet_file, *PATCHED, "--yes", timeout=600)
    assert refused.returncode == 2 and "--resume" in refused.stderr
    assert set(listed(fleet)) == set(fleet.urls[1:])


def test_resume_after_the_fix_finishes_the_roll(fleet: Any) -> None:
    code, doc, err = roll(fleet, *PATCHED, "--resume")
    assert code == 0 and doc["status"] == "done", (doc, err)
    assert doc["order"] == [fleet.hosts[0]]  # the others are already at the target: untouched
    assert set(listed(fleet)) == set(fleet.urls)


def _spawn_roll(fleet: Any, log: Path, *args: str) -> subprocess.Popen[str]:
    out = open(log, "wb")  # noqa: SIM115 - closed with the process
    return spawn_k26ctl(
        "deploy", fleet.fleet_file, *args, *QUICK, "--yes", stdout=out, stderr=subprocess.STDOUT
    )


def _wait_for(log: Path, text: str, proc: subprocess.Popen[str], timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while text not in log.read_text(errors="replace"):
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.1)


def test_ctrl_c_mid_roll_then_a_router_restart_mid_resume(fleet: Any, tmp_path: Path) -> None:
    first, second, third = fleet.hosts
    log = tmp_path / "roll.log"
    change = [
        "--set",
        "sglang.max_running_requests=12",
    ]  # a unit change on every member, whatever came before
    proc = _spawn_roll(fleet, log, *change)
    _wait_for(log, f"[{second}] deploy: restart: changed", proc)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(120) == 130, log.read_text()
    text = log.read_text()
    assert f"{first}  new config, serving" in text
    assert f"{second}  interrupted, out of router" in text
    assert f"{third}  old config, serving" in text
    record = LocalStore(fleet.name).load()
    assert record is not None and record.status == "interrupted"
    assert set(listed(fleet)) == {fleet.urls[0], fleet.urls[2]}

    # resume; while the last member restarts into the new config, the router restarts and forgets everyone
    log2 = tmp_path / "resume.log"
    proc = _spawn_roll(fleet, log2, *change, "--resume")
    _wait_for(log2, f"[{third}] deploy: restart: changed", proc)
    from k26ctl.lab.fleet import restart_router

    restart_router(fleet.name)
    # the router's list, each with the roll's log read just after it: what the roll had not yet
    # logged had not happened when the list was read
    samples: list[tuple[set[str], str]] = []
    deadline = time.monotonic() + 600
    while proc.poll() is None and time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError):
            workers = set(listed(fleet))
            samples.append((workers, log2.read_text()))
        time.sleep(0.1)
    assert proc.wait(60) == 0, log2.read_text()
    text = log2.read_text()
    assert f"[{second}] new config, serving" in text  # the interrupted member was finished first
    mid_deploy = [w for w, log in samples if f"[{third}] out of router, verified" not in log]
    assert mid_deploy and all(fleet.urls[2] not in w for w in mid_deploy), mid_deploy  # never re-admitted
    done = re.compile(rf"^\[{re.escape(third)}\] new config, serving$", re.M)  # its soak is over
    mid_roll = [w for w, log in samples if not done.search(log)]
    # the members in service were re-added while the roll went on, not only by its final resync
    assert any({fleet.urls[0], fleet.urls[1]} <= w for w in mid_roll), mid_roll
    assert f"[{first}] resync: in service but not listed by the router" in text
    assert set(listed(fleet)) == set(fleet.urls)
