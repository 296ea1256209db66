#!/usr/bin/env python3
"""Start-up time of the k26ctl CLI against a bare interpreter.

Each command runs N times in a fresh process with the real interpreter binary (resolved from
sys.executable, so no pyenv/asdf shim script adds its own start-up); the console script is run as
`<python> <bin>/k26ctl`, which is what its shebang does. Reports median/min/max wall time and the
overhead over `python -c pass`. Goal: `k26ctl --help` under ~0.15 s here.

Usage: benchmarks/startup.py [-n 20] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any

GOAL_SECONDS = 0.15


def real_python() -> str:
    return os.path.realpath(sys.executable)


def console_script() -> str | None:
    candidate = Path(sysconfig.get_path("scripts")) / "k26ctl"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("k26ctl")
    # a shim is a shell script; only a Python console script can be run through the interpreter
    if found and Path(found).read_bytes()[:2] == b"#!" and b"python" in Path(found).read_bytes()[:200]:
        return found
    return None


def bytecode_state() -> str:
    """How many of k26ctl's modules will load from current .pyc files (scripts/bootstrap.sh compiles
    them; with PYTHONDONTWRITEBYTECODE set nothing else does): the others are compiled at every start."""
    import importlib.util

    package = Path(__file__).resolve().parent.parent / "k26ctl"
    sources = list(package.rglob("*.py"))
    fresh = 0
    for source in sources:
        cached = Path(importlib.util.cache_from_source(str(source)))
        fresh += cached.exists() and cached.stat().st_mtime >= source.stat().st_mtime
    flag = os.environ.get("PYTHONDONTWRITEBYTECODE", "")
    return (
        f"{fresh} of {len(sources)} k26ctl modules have current .pyc files (PYTHONDONTWRITEBYTECODE={flag!r})"
    )


def time_runs(argv: list[str], runs: int) -> tuple[list[float], list[float]]:
    """Wall seconds and CPU seconds (user + system of the child) per run. CPU time barely moves when
    other work shares the cores; wall time is what a user waits."""
    env = {**os.environ, "NO_COLOR": "1"}
    subprocess.run(argv, capture_output=True, env=env, check=True)  # warm the page cache
    wall, cpu = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(argv, capture_output=True, env=env, check=True)
        wall.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
    return wall, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", "--runs", type=int, default=20)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    python = real_python()
    cases: list[tuple[str, list[str]]] = [("python -c pass", [python, "-c", "pass"])]
    script = console_script()
    if script:
        cases += [
            ("k26ctl --help", [python, script, "--help"]),
            ("k26ctl --version", [python, script, "--version"]),
        ]
    cases += [
        ("python -m k26ctl --help", [python, "-m", "k26ctl", "--help"]),
        ("python -m k26ctl --version", [python, "-m", "k26ctl", "--version"]),
    ]
    rows: list[dict[str, Any]] = []
    for label, argv in cases:
        wall, cpu = time_runs(argv, args.runs)
        rows.append(
            {
                "command": label,
                "median": statistics.median(wall),
                "min": min(wall),
                "max": max(wall),
                "cpu_median": statistics.median(cpu),
            }
        )
    base = rows[0]["median"]
    for row in rows:
        row["over_python"] = row["median"] - base
    if args.json:
        doc = {
            "python": python,
            "runs": args.runs,
            "goal_seconds": GOAL_SECONDS,
            "loadavg": os.getloadavg(),
            "bytecode": bytecode_state(),
        }
        print(json.dumps({**doc, "results": rows}, indent=2))
        return
    print(f"interpreter: {python}   runs per command: {args.runs}")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}  (wall times grow with it)")
    print(bytecode_state())
    print(f"{'command':<28} {'median':>7} {'min':>7} {'max':>7} {'over py':>8} {'cpu med':>8}")
    for r in rows:
        walls = " ".join(f"{r[k]:7.3f}" for k in ("median", "min", "max"))
        print(f"{r['command']:<28} {walls} {r['over_python']:8.3f} {r['cpu_median']:8.3f}")
    worst = max(r["median"] for r in rows[1:])
    verdict = "ok" if worst < GOAL_SECONDS else "over the goal"
    print(f"slowest k26ctl median {worst:.3f} s wall (goal < {GOAL_SECONDS} s): {verdict}")


if __name__ == "__main__":
    main()
