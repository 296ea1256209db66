"""How fast `k26ctl watch` notices a fault switched on in a serving lab server, and its recovery.

One lab server (patched DDTree budget 16) started with the lab-only fault switch (K26LAB_FAULT_SWITCH);
`k26ctl watch --url URL --suite lab --interval INTERVAL --json` runs as an operator would run it (a
separate process). For each of TRIALS rounds, after a random wait within one interval, the mask bug is
switched on and the time until the watcher reports `failing` is taken; then it is switched off and the
time until `healthy` is taken. The requirement: failing within two intervals.

    python3 benchmarks/watch_detection.py --interval 10 --trials 3
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from k26ctl.lab.server.fault_switch import RuntimeFaults, write_switch  # noqa: E402
from tests.support.lab_server import lab_server  # noqa: E402


def wait_state(lines: queue.Queue[dict[str, Any]], state: str, timeout: float) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        try:
            record = lines.get(timeout=1.0)
        except queue.Empty:
            continue
        if record.get("state") == state:
            return time.monotonic() - started
    raise SystemExit(f"no {state!r} within {timeout} s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--interval", type=float, default=10.0)
    parser.add_argument("--trials", type=int, default=3)
    args = parser.parse_args(argv)
    rng = random.Random(26)
    with tempfile.TemporaryDirectory() as tmp:
        switch = Path(tmp) / "faults.json"
        env_server = {"K26LAB_FAULT_SWITCH": str(switch)}
        with lab_server("ddtree-b16-patched", patched=True, env=env_server) as server:
            env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_STATE_HOME": tmp}
            cmd = [sys.executable, "-m", "k26ctl", "watch", "--url", server.url, "--suite", "lab",
                   "--interval", f"{args.interval:g}", "--json"]  # fmt: skip
            proc = subprocess.Popen(cmd, env=env, cwd=ROOT, text=True, stdout=subprocess.PIPE)
            lines: queue.Queue[dict[str, Any]] = queue.Queue()
            assert proc.stdout is not None
            stdout = proc.stdout

            def read_lines() -> None:
                for x in stdout:
                    if x.strip():
                        lines.put(json.loads(x))

            threading.Thread(target=read_lines, daemon=True).start()
            try:
                wait_state(lines, "healthy", 120)
                to_fail, to_heal = [], []
                for trial in range(args.trials):
                    time.sleep(rng.uniform(0, args.interval))
                    while not lines.empty():
                        lines.get()
                    write_switch(switch, RuntimeFaults(mask_bug=True))
                    to_fail.append(wait_state(lines, "failing", 6 * args.interval + 120))
                    time.sleep(rng.uniform(0, args.interval))
                    while not lines.empty():
                        lines.get()
                    write_switch(switch, RuntimeFaults())
                    to_heal.append(wait_state(lines, "healthy", 6 * args.interval + 120))
                    shown = f"failing after {to_fail[-1]:.1f} s, healthy after {to_heal[-1]:.1f} s"
                    print(f"trial {trial + 1}: {shown}", flush=True)
            finally:
                proc.send_signal(signal.SIGTERM)
                proc.wait(120)
    print(f"\ninterval {args.interval:g} s (jitter 10 %), {args.trials} trials")
    print("| | mean s | max s | max / interval |\n|---|---|---|---|")
    for label, values in (("switch on -> failing", to_fail), ("switch off -> healthy", to_heal)):
        worst = max(values)
        print(f"| {label} | {statistics.mean(values):.1f} | {worst:.1f} | {worst / args.interval:.2f} |")
    return 0 if max(to_fail) <= 2 * args.interval else 1


if __name__ == "__main__":
    raise SystemExit(main())
