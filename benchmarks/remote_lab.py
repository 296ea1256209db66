#!/usr/bin/env python3
"""Speed of the remote layer on the nspawn lab host (needs root, systemd-container, openssh-server).

Measures, over N rounds on a fresh lab host each round:
- lab up (to the first SSH banner) and lab down (to nothing left behind);
- SSH connect + authenticate with k26ctl's SSHHost (paramiko, strict host keys) against OpenSSH's
  `ssh ... true` (one full connection each);
- one command round trip on an open connection (`true`);
- a unit round trip: upload the unit atomically, daemon-reload, restart, is-active, journal lines,
  stop (what a deploy does on the host, minus the server's own load time).

Usage: benchmarks/remote_lab.py [-n 3] [--name t-bench-remote] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

UNIT = b"""[Unit]
Description=k26ctl remote benchmark

[Service]
ExecStart=/bin/sh -c 'echo bench-ready; exec sleep 600'
"""


def _timed(fn: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def one_round(name: str) -> dict[str, float]:
    from k26ctl.lab.host import lab_down, lab_up, leftovers
    from k26ctl.remote.ssh import SSHHost, SSHTarget
    from k26ctl.remote.systemd import Systemd

    out: dict[str, float] = {}
    out["lab_up"], state = _timed(lambda: lab_up(name))
    try:
        target = SSHTarget(
            alias=name,
            hostname=state.address,
            user="root",
            identity_files=[state.key_path],
            known_hosts=[state.known_hosts_path],
            use_agent=False,
        )
        connects = []
        for _ in range(5):
            seconds, host = _timed(lambda: SSHHost(target).open())
            connects.append(seconds)
            host.close()
        out["ssh_connect_paramiko"] = statistics.median(connects)
        openssh = [*state.openssh_argv(), "true"]
        samples = [_timed(lambda: subprocess.run(openssh, check=True))[0] for _ in range(5)]
        out["ssh_connect_run_openssh"] = statistics.median(samples)

        with SSHHost(target).open() as host:
            samples = [_timed(lambda: host.run(["true"], check=True))[0] for _ in range(20)]
            out["command_round_trip"] = statistics.median(samples)

            def unit_round_trip() -> None:
                sd = Systemd(host, "k26bench.service")
                host.write_file_atomic("/etc/systemd/system/k26bench.service", UNIT)
                cursor = sd.cursor_now()
                sd.daemon_reload()
                sd.restart()
                assert sd.is_active() == "active"
                deadline = time.monotonic() + 10
                while not any(e.message == "bench-ready" for e in sd.journal(cursor=cursor)):
                    assert time.monotonic() < deadline, "no journal line"
                    time.sleep(0.02)
                sd.stop()
                host.run(["rm", "-f", "/etc/systemd/system/k26bench.service"], check=True)
                sd.daemon_reload()

            out["unit_round_trip"] = _timed(unit_round_trip)[0]
    finally:
        out["lab_down"], _ = _timed(lambda: lab_down(name))
        left = leftovers(name)
        if left:
            raise SystemExit(f"lab down left: {left}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("-n", "--rounds", type=int, default=3)
    parser.add_argument("--name", default="t-bench-remote")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    from k26ctl.lab.host import prerequisite_problem

    problem = prerequisite_problem()
    if problem:
        raise SystemExit(f"cannot run: {problem}")
    rounds = [one_round(args.name) for _ in range(args.rounds)]
    summary = {
        key: {
            "median_s": round(statistics.median(r[key] for r in rounds), 4),
            "min_s": round(min(r[key] for r in rounds), 4),
            "max_s": round(max(r[key] for r in rounds), 4),
        }
        for key in rounds[0]
    }
    if args.json:
        print(json.dumps({"rounds": args.rounds, "results": summary}, indent=2))
        return
    print(f"{'measure':<26} {'median':>9} {'min':>9} {'max':>9}   ({args.rounds} rounds)")
    for key, values in summary.items():
        print(f"{key:<26} {values['median_s']:>8.3f}s {values['min_s']:>8.3f}s {values['max_s']:>8.3f}s")


if __name__ == "__main__":
    main()
