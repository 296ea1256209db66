"""A fleet of two real-SGLang lab hosts (0.5.15) behind the real SMG (`smg` 1.13.0), under client load:
a roll of the untrained model with a config change halts at the canary and no client sees it (SMG would
put the restarted canary back on its /health 200 alone; k26ctl keeps it out of SMG's registry); the
resume with the trained model rolls the change to both servers with no failed request (SMG's own drain
count, the real SIGTERM drain, the load read from the real /get_load). Three real restarts after the
fleet's two starts. sglang-router 0.3.2 rolls the stand-in fleet (tests/fleet/test_fleet_lab.py).

One fleet for the module, its own lane (tests/support/lanes.py): two real servers of its own beside
the realsglang lane's one, never more.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.fleet_roll import Load, listed
from tests.support.fleet_roll import roll as roll_fleet
from tests.support.hosts import lab_host_name

from .realserver import GARBAGE

pytestmark = [pytest.mark.realsglang, pytest.mark.labhost, pytest.mark.lab, pytest.mark.timeout(1800)]

QUICK = ["--set", f"smoke.suite={Path(__file__).parent / 'data' / 'quick-real.yaml'}"]
CHANGE = ["--set", "sglang.max_running_requests=6"]  # a unit change, nothing else


@pytest.fixture(scope="module")
def real_fleet() -> Iterator[Any]:
    from k26ctl.lab.host import prerequisite_problem
    from k26ctl.lab.real.releases import RELEASES, installed

    reason = prerequisite_problem()
    if reason:
        pytest.skip(f"lab host unavailable: {reason}")
    if not installed(RELEASES[0]):
        pytest.skip(f"real SGLang {RELEASES[0]} not installed: run `bash scripts/bootstrap.sh --real-sglang`")
    pytest.importorskip("smg")
    from k26ctl.lab.fleet import lab_fleet_down, lab_fleet_up

    name = lab_host_name() + "rf"
    lab_fleet_down(name)  # a run killed earlier
    state = lab_fleet_up(name, 2, profile="lab/sglang.yaml", real_sglang=RELEASES[:1], gateway="smg")
    try:
        yield state
    finally:
        lab_fleet_down(name)


def roll(fleet: Any, *args: str) -> tuple[int, dict[str, Any], str]:
    return roll_fleet(fleet, *args, *QUICK, timeout=1500)


def load(fleet: Any) -> Load:
    """Bounded by 5000 requests and 1200 s, paced to 2 a second: steady traffic through every drain and
    restart, without the full-speed load (about 8 a second on two cores) that took a core from every
    other test running beside this one. Two answers on each side of the roll, each within 300 s."""
    return Load(
        fleet, requests=5000, duration=1200, max_tokens=16, rate=2.0, side_answers=2, side_bound=300.0
    )


def test_the_untrained_model_halts_the_roll_at_the_canary_and_no_client_sees_it(real_fleet: Any) -> None:
    canary, other = real_fleet.hosts
    with load(real_fleet) as running:
        code, doc, err = roll(real_fleet, "--set", GARBAGE, *CHANGE)
    assert code == 1 and doc["status"] == "halted", (doc, err)
    assert doc["order"][0] == canary and doc["reason"].startswith(f"canary {canary} failed"), doc
    detail = doc["members"][canary]["detail"]
    print(f"\ncanary: {detail}")
    assert "smoke" in detail and "/health=200" in detail, detail  # up and healthy, and talking garbage
    assert doc["members"][canary]["where"] == "failed, out of router (new config)"
    assert doc["members"][other]["where"] == "old config, serving"
    assert set(listed(real_fleet)) == {real_fleet.urls[1]}  # SMG holds no entry for the canary
    assert running.report is not None
    summary = running.report.summary(running.report.samples)
    assert summary["sent"] > 0 and summary["failed"] == 0 and summary["degenerate"] == 0, (
        running.report.to_json()
    )


def test_resume_with_the_trained_model_rolls_the_change_under_load_and_fails_no_request(
    real_fleet: Any,
) -> None:
    """The resumed roll takes the change to both real servers, the canary first, while clients keep
    sending through SMG: its drain window, the real SIGTERM drain and its worker list lose no request."""
    with load(real_fleet) as running:
        started = time.time()
        code, doc, err = roll(real_fleet, *CHANGE, "--resume")
        ended = time.time()
    assert code == 0 and doc["status"] == "done", (doc, err)
    assert doc["order"] == real_fleet.hosts  # the canary (untrained) first, then the other (old config)
    assert {m["where"] for m in doc["members"].values()} == {"new config, serving"}
    assert running.report is not None
    total = running.report.summary(running.report.samples)
    during = running.report.summary(running.report.select(started, ended))
    print(f"\nreal roll {ended - started:.0f} s; load during it: {during}; in all: {total}")
    assert during["sent"] > 0 and total["sent"] > during["sent"]
    assert total["failed"] == 0 and total["degenerate"] == 0, running.report.to_json()
    assert set(listed(real_fleet)) == set(real_fleet.urls) and all(listed(real_fleet).values())
    for url in real_fleet.urls:  # the change is live on both real servers, with the trained weights
        info = httpx.get(url + "/server_info", timeout=30, trust_env=False).json()
        assert info["version"] == "0.5.15" and info["max_running_requests"] == 6, info
        assert info["model_path"] == "/opt/sglang/models/k26real-tiny", info
