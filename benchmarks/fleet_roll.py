#!/usr/bin/env python3
"""A fleet roll's wall time against the sum of its members' single-host deploys, on the real lab.

    python3 benchmarks/fleet_roll.py [--name NAME] [--size 3] [--rounds 1] [--json]

Brings up a lab fleet (NAME-1..NAME-N behind a real sglang-router on loopback, starting at DDTree
budget 7), then per round:
1. single: `k26ctl.deploy.deploy` of patched budget 16 to each member in turn (restart, readiness,
   smoke forced, as the roll does): the sum of their wall times. Then back to budget 7 the same way.
2. roll: the fleet roll of the same change (plan, then per member remove, drain, deploy, add, soak).
Both run while chat load goes through the router (bounded: at most 5000 requests, 600 s each), so both
share the CPU with it, and the load's failures show what clients see in each case.
Overhead per member = (roll wall - sum of single deploys) / N, with the roll's own per-step times.
The soak is set to 0 for the comparison (it is a chosen wait, not overhead) and reported separately.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

PATCHED = ["spec.ddtree.budget=16", "patches=[triton-ddtree-verify-width]"]
BUDGET7: list[str] = []


def single_deploys(fleet_file: str, overrides: list[str]) -> list[float]:
    from k26ctl.deploy import DeployOptions, deploy
    from k26ctl.fleet.model import load_fleet

    fleet = load_fleet(fleet_file, overrides)
    walls = []
    for member in fleet.members:
        t0 = time.monotonic()
        result = deploy(member.loaded, DeployOptions(yes=True, smoke=True))
        walls.append(time.monotonic() - t0)
        if result.exit_code != 0 or not result.restarted:
            raise SystemExit(f"single deploy to {member.name} did not restart cleanly: {result.message}")
    return walls


def fleet_roll(fleet_file: str, overrides: list[str], soak: float) -> dict[str, Any]:
    from k26ctl.fleet.api import roll_fleet, roll_options
    from k26ctl.fleet.model import load_fleet

    fleet = load_fleet(fleet_file, overrides)
    result = roll_fleet(fleet, roll_options(fleet, soak=soak))
    if result.exit_code != 0:
        raise SystemExit(f"the roll did not finish: {result.record.reason}")
    steps: dict[str, list[float]] = {}
    for state in result.record.members.values():
        for step, seconds in state.seconds.items():
            steps.setdefault(step, []).append(seconds)
    return {"wall": result.wall_seconds, "steps": {k: round(statistics.mean(v), 3) for k, v in steps.items()}}


def under_load(router_url: str, work: Any) -> tuple[Any, Any]:
    """`work()` while chat load runs through the router (bounded: 5000 requests, 600 s)."""
    from k26ctl.lab.load import run_load

    stop = threading.Event()
    box: dict[str, Any] = {}

    def load() -> None:
        box["report"] = run_load(router_url, requests=5000, duration=600, stop=stop)

    loader = threading.Thread(target=load)
    loader.start()
    try:
        out = work()
    finally:
        stop.set()
        loader.join()
    return out, box["report"]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--name", default="bfleet")
    parser.add_argument("--size", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--keep", action="store_true", help="leave the fleet up")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    from k26ctl.lab.fleet import lab_fleet_down, lab_fleet_up

    lab_fleet_down(args.name)
    state = lab_fleet_up(args.name, args.size, on_progress=lambda m: print(m, file=sys.stderr))
    rounds = []
    try:
        for _ in range(args.rounds):
            # the same load runs through the router in both: the CPU is shared, so both pay for it
            singles, single_report = under_load(
                state.router_url, lambda: single_deploys(state.fleet_file, PATCHED)
            )
            single_deploys(state.fleet_file, BUDGET7)
            roll, report = under_load(
                state.router_url, lambda: fleet_roll(state.fleet_file, PATCHED, soak=0.0)
            )
            single_deploys(state.fleet_file, BUDGET7)  # back to the start for the next round
            rounds.append(
                {
                    "single_sum": sum(singles),
                    "singles": [round(s, 3) for s in singles],
                    "roll_wall": roll["wall"],
                    "roll_steps": roll["steps"],
                    "overhead_per_member": (roll["wall"] - sum(singles)) / args.size,
                    "load_during_roll": report.summary(report.samples),
                    "load_during_singles": single_report.summary(single_report.samples),
                }
            )
    finally:
        if not args.keep:
            lab_fleet_down(args.name)
    summary = {
        "size": args.size,
        "rounds": rounds,
        "single_sum_median": statistics.median(r["single_sum"] for r in rounds),
        "roll_wall_median": statistics.median(r["roll_wall"] for r in rounds),
        "overhead_per_member_median": statistics.median(r["overhead_per_member"] for r in rounds),
    }
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    print(f"fleet of {args.size} lab hosts, {args.rounds} round(s), budget 7 -> patched budget 16, smoke on")
    for i, r in enumerate(rounds, 1):
        print(
            f"round {i}: sum of single deploys {r['single_sum']:.1f} s {r['singles']}; "
            f"roll {r['roll_wall']:.1f} s; overhead per member {r['overhead_per_member']:+.1f} s"
        )
        print(f"  roll steps (mean per member, s): {r['roll_steps']}")
        print(f"  load through the router during the roll: {r['load_during_roll']}")
        print(
            f"  load through the router during the single deploys (members stay in the router): "
            f"{r['load_during_singles']}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
