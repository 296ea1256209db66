#!/usr/bin/env python3
"""Deploy overhead of k26ctl on the lab host: what the tool adds on top of the server's own start.

    python3 benchmarks/deploy_overhead.py [--lab NAME] [--rounds 5] [--json]

Measured on a real lab host (systemd in nspawn, sshd, the lab server), with the patched DDTree budget
16 lab profile and smoke off (smoke time is the suite's, measured by its own benchmark):
- change: a deploy whose unit changes (upload + daemon-reload + restart + readiness). Overhead = wall
  time minus the server's own time, read from the host's journal for every run: its load (systemd's
  "Started" line to the server's "ready to roll" line) and the old process's stop ("Stopping" to
  "Stopped": the lab server takes about 2 s to shut down). In-process (`k26ctl.deploy.deploy`) and as
  an operator runs it (`python -m k26ctl deploy ... --json`, interpreter start-up included).
- no-change: an identical second deploy (facts, plan, one readiness probe, history line).
- failure: a server that dies while loading (lab fault exit-during-load) or whose scheduler crashes
  (scheduler-crash); time from the server's failure line in the journal to k26ctl's readiness verdict.
  The lab host shares this machine's kernel clock, so the journal's timestamps and time.time() compare.
Aims: overhead under 1 s, no-change under 0.8 s, failure reported within 2 s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

PROFILE = str(REPO / "profiles" / "lab" / "ddtree-b16-patched.yaml")
AIMS = {"change overhead": 1.0, "no-change": 0.8, "failure report": 2.0}


def stats(values: list[float]) -> dict[str, float]:
    return {
        "median": round(statistics.median(values), 3),
        "min": round(min(values), 3),
        "max": round(max(values), 3),
        "n": len(values),
    }


def overrides(lab: str, *more: str) -> list[str]:
    return [f"host.lab={lab}", *more]


def in_process(lab: str, *more: str, smoke: bool = False) -> Any:
    from k26ctl.deploy import DeployOptions, deploy
    from k26ctl.profile import load_profile

    loaded = load_profile(PROFILE, overrides(lab, *more))
    return deploy(loaded, DeployOptions(yes=True, smoke=smoke))


def cli(lab: str, *more: str) -> tuple[float, dict[str, Any]]:
    argv = [sys.executable, "-m", "k26ctl", "deploy", PROFILE, "--yes", "--no-smoke", "--json"]
    for item in overrides(lab, *more):
        argv += ["--set", item]
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "NO_COLOR": "1"}, cwd=REPO)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"deploy failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return wall, json.loads(proc.stdout)


def change_runs(lab: str, rounds: int) -> dict[str, Any]:
    inproc, cli_over, detect, loads, stops = [], [], [], [], []
    for i in range(rounds):
        result = in_process(lab, f"sglang.decode_log_interval={41 + 2 * i}")
        assert result.exit_code == 0 and result.restarted and result.load_seconds, result.message
        server = result.load_seconds + (result.stop_seconds or 0.0)
        inproc.append(result.wall_seconds - server)
        detect.append((result.ready_seconds or 0) - result.load_seconds)
        loads.append(result.load_seconds)
        stops.append(result.stop_seconds or 0.0)
        wall, doc = cli(lab, f"sglang.decode_log_interval={42 + 2 * i}")
        assert doc["restarted"] and doc["load_seconds"], doc
        cli_over.append(wall - doc["load_seconds"] - (doc["stop_seconds"] or 0.0))
        loads.append(doc["load_seconds"])
        stops.append(doc["stop_seconds"] or 0.0)
    return {
        "server stop (journal)": stats(stops),
        "server load (journal)": stats(loads),
        "change overhead (in-process)": stats(inproc),
        "change overhead (CLI)": stats(cli_over),
        "ready noticed after server ready": stats(detect),
    }


def no_change_runs(lab: str, rounds: int) -> dict[str, Any]:
    in_process(lab)  # settle on the base profile
    inproc, walls = [], []
    for _ in range(rounds):
        result = in_process(lab)
        assert result.exit_code == 0 and not result.restarted and not result.changed, result.message
        inproc.append(result.wall_seconds)
        wall, doc = cli(lab)
        assert not doc["restarted"], doc
        walls.append(wall)
    return {"no-change (in-process)": stats(inproc), "no-change (CLI)": stats(walls)}


def failure_runs(lab: str, rounds: int) -> dict[str, Any]:
    from k26ctl.deploy import DeployOptions, deploy
    from k26ctl.profile import load_profile
    from k26ctl.remote import connect
    from k26ctl.remote.systemd import Systemd
    from k26ctl.render import unit_name

    out: dict[str, Any] = {}
    for fault in ("exit-during-load", "scheduler-crash"):
        delays = []
        for _ in range(rounds):
            in_process(lab)
            loaded = load_profile(PROFILE, overrides(lab, f"service.environment.K26LAB_FAULT={fault}"))
            with connect(loaded.profile) as host:
                cursor = Systemd(host, unit_name(loaded.profile)).cursor_now()
            reported: list[float] = []

            def on_event(event: Any, reported: list[float] = reported) -> None:
                if (
                    event.kind == "step"
                    and event.data.get("name") == "readiness"
                    and event.data["status"] == "failed"
                ):
                    reported.append(time.time())

            result = deploy(loaded, DeployOptions(yes=True, smoke=False), on_event=on_event)
            assert result.exit_code == 1 and result.failure == "readiness" and reported, result.message
            with connect(loaded.profile) as host:
                entries = Systemd(host, unit_name(loaded.profile)).journal(cursor=cursor)
            marks = [e for e in entries if "fault" in e.message or "hit an exception" in e.message]
            if not marks:
                raise SystemExit(
                    f"{fault}: no failure line in the journal: {[e.message for e in entries][-8:]}"
                )
            delays.append(reported[0] - marks[0].timestamp_us / 1e6)
        out[f"failure report ({fault})"] = stats(delays)
    in_process(lab)  # leave the host serving the base profile
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lab", default=os.environ.get("K26CTL_BENCH_LAB", "t-deploy-bench"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    from k26ctl.lab.host import lab_down, lab_status, lab_up

    was_up = lab_status(args.lab).running
    lab_up(args.lab)
    try:
        in_process(args.lab)  # first deploy: unit, patch, start
        results: dict[str, Any] = {}
        results.update(change_runs(args.lab, args.rounds))
        results.update(no_change_runs(args.lab, args.rounds))
        results.update(failure_runs(args.lab, max(1, args.rounds // 2)))
    finally:
        if not was_up:
            lab_down(args.lab)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"k26ctl deploy overhead on lab host {args.lab} ({os.cpu_count()} cores), seconds")
    print(f"{'measure':<40} {'median':>8} {'min':>8} {'max':>8} {'n':>3}  aim")
    for name, s in results.items():
        aim = next((f"< {v:g}" for k, v in AIMS.items() if name.startswith(k)), "")
        print(f"{name:<40} {s['median']:>8.3f} {s['min']:>8.3f} {s['max']:>8.3f} {s['n']:>3}  {aim}")


if __name__ == "__main__":
    main()
