"""`k26ctl watch --once`, repeated as cron would run it, on a lab server whose fault shows only on some
prompts: after how many runs does it answer `failing`?

Each trial starts a fresh lab server of PROFILE (default ddtree-b7-subtle: in every verify pass the
second request of the batch commits the runner-up where the top two logits are within 4) and a fresh
state directory, then runs `python -m k26ctl watch --once --url URL --suite lab --json` (a separate
process each time, as cron would) until it exits 1 (failing) or --max-runs is reached. Each run takes
the next slice of the canary's pool (the lab suite's 7 greedy prompts in slices of 3: 3 slices).

    python3 benchmarks/watch_slices.py --trials 5 --max-runs 12
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.lab_server import lab_server  # noqa: E402


def trial(profile: str, max_runs: int, seed: int) -> dict[str, Any]:
    runs: list[dict[str, Any]] = []
    env_server = {"K26LAB_NEAR_TIE_SEED": str(seed)}
    with tempfile.TemporaryDirectory() as tmp, lab_server(profile, env=env_server) as server:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_STATE_HOME": tmp}
        cmd = [
            sys.executable,
            "-m",
            "k26ctl",
            "watch",
            "--once",
            "--url",
            server.url,
            "--suite",
            "lab",
            "--json",
        ]
        for _ in range(max_runs):
            done = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
            record: dict[str, Any] = next(
                (json.loads(x) for x in reversed(done.stdout.splitlines()) if '"verdict"' in x), {}
            )
            runs.append(
                {
                    "rc": done.returncode,
                    "state": record.get("state"),
                    "slice": record.get("slice"),
                    "requests": record.get("requests"),
                    "reason": (record.get("reasons") or [""])[0][:160],
                }
            )
            if done.returncode == 1:
                break
    first = next((i + 1 for i, r in enumerate(runs) if r["rc"] == 1), None)
    return {"profile": profile, "first_failing_run": first, "runs": runs}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--profile", default="ddtree-b7-subtle")
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--max-runs", type=int, default=12)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    rows = []
    for n in range(args.trials):
        rows.append(trial(args.profile, args.max_runs, n + 1))
        print(json.dumps(rows[-1]), flush=True)
        if args.json:
            args.json.write_text(json.dumps(rows, indent=1))
    firsts = [r["first_failing_run"] for r in rows]
    found = [f for f in firsts if f is not None]
    requests = [run["requests"] for r in rows for run in r["runs"] if run["requests"]]
    print(f"\n{args.profile}: `watch --once` repeated, {args.trials} trials of at most {args.max_runs} runs")
    print("| trials failing | first failing run (each trial) | median | max | requests per run (median) |")
    print("|---|---|---|---|---|")
    print(
        f"| {len(found)}/{len(rows)} | {', '.join(str(f) if f else '-' for f in firsts)} | "
        f"{statistics.median(found) if found else '-'} | {max(found) if found else '-'} | "
        f"{statistics.median(requests) if requests else '-'} |"
    )
    return 0 if len(found) == len(rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
