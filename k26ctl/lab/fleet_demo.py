"""`k26ctl lab demo --fleet`: rolling deploys behind the real gateway (sglang-router 0.3.2, or SMG
1.13.0 with `--gateway smg`), with chat load running through it.

1. a lab fleet of 3 at DDTree budget 7 behind the gateway (booted if not up);
2. a good roll to patched budget 16: every member out, drained, deployed, smoke-tested, back;
3. a roll to unpatched budget 16: the canary fails its smoke, the roll halts, the canary stays out of
   the router, the other two keep serving; clients never see the degenerate text;
4. `--resume` with the fix (patched budget 16) finishes the halted roll.
The load's successes, failures, degenerate answers and latency are printed per roll. The fleet stays up.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from k26ctl.errors import UsageError
from k26ctl.fleet.api import roll_fleet, roll_options
from k26ctl.fleet.model import load_fleet
from k26ctl.fleet.roll import RollEvent, RollResult
from k26ctl.fleet.router_process import LAUNCHERS
from k26ctl.lab.fleet import lab_fleet_up, load_state
from k26ctl.lab.load import LoadReport, run_load

PATCHED = ["spec.ddtree.budget=16", "patches=[triton-ddtree-verify-width]"]
UNPATCHED = ["spec.ddtree.budget=16", "patches=[]"]
BUDGET7 = ["spec.ddtree.budget=7", "patches=[]"]


@dataclass
class DemoRoll:
    title: str
    expected: str
    result: RollResult
    load: LoadReport

    @property
    def as_expected(self) -> bool:
        clean = all(s.ok and not s.degenerate for s in self.load.samples)
        return self.result.status == self.expected and clean


def _roll(
    fleet_file: str, router_url: str, overrides: list[str], on_event: Any, resume: bool = False
) -> tuple[RollResult, LoadReport]:
    stop = threading.Event()
    box: dict[str, LoadReport] = {}

    def load() -> None:
        box["report"] = run_load(router_url, requests=5000, duration=900, stop=stop)

    loader = threading.Thread(target=load, daemon=True)
    loader.start()
    try:
        fleet = load_fleet(fleet_file, overrides)
        result = roll_fleet(fleet, roll_options(fleet, resume=resume), on_event)
    finally:
        stop.set()
        loader.join(120)
    return result, box["report"]


def run_fleet_demo(
    name: str,
    say: Callable[[str], None],
    on_event: Callable[[RollEvent], None] | None,
    *,
    gateway: str = "sglang-router",
) -> list[DemoRoll]:
    if gateway not in LAUNCHERS:
        raise UsageError(f"--gateway {gateway}: not a gateway k26ctl runs", f"one of: {', '.join(LAUNCHERS)}")
    state = load_state(name)
    if state is not None and state.gateway != gateway:
        raise UsageError(
            f"lab fleet {name} is up behind {state.gateway}, not {gateway}",
            f"k26ctl lab fleet down --name {name} (or pass --gateway {state.gateway})",
        )
    if state is None:
        say(f"== lab fleet {name}: 3 lab hosts behind {gateway}, DDTree budget 7")
        state = lab_fleet_up(name, 3, gateway=gateway, on_progress=say)
    else:
        say(f"== lab fleet {name} is up: back to budget 7 first")
        fleet = load_fleet(state.fleet_file, BUDGET7)
        options = roll_options(fleet)
        options.resume = _needs_resume(fleet.name)
        roll_fleet(fleet, options, on_event)
    steps = [
        ("good roll: budget 7 -> patched budget 16", PATCHED, "done", False),
        ("bad roll: -> unpatched budget 16 (the mask-width bug)", UNPATCHED, "halted", False),
        ("resume with the fix: -> patched budget 16", PATCHED, "done", True),
    ]
    rolls = []
    for title, overrides, expected, resume in steps:
        sets = " ".join(f"--set {o}" for o in overrides)
        say(f"== {title}\n   k26ctl deploy {state.fleet_file} {sets} --yes{' --resume' if resume else ''}")
        result, load = _roll(state.fleet_file, state.router_url, overrides, on_event, resume)
        rolls.append(DemoRoll(title, expected, result, load))
        say(f"   roll: {result.status} in {result.wall_seconds:.1f} s: {result.record.reason}")
        for member, where in result.where().items():
            say(f"     {member}: {where}")
        say(f"   clients through {state.gateway}: {load.text().splitlines()[0]}")
    return rolls


def _needs_resume(fleet: str) -> bool:
    from k26ctl.fleet.record import LocalStore

    record = LocalStore(fleet).load()
    return record is not None and record.unfinished and any(not s.in_service for s in record.members.values())
