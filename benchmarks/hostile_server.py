"""Time and memory of `k26ctl smoke` against every hostile fault-server mode.

For each mode in tests/support/fake_sglang.py HOSTILE_MODES, a fake SGLang server runs in its own
process and `python -m k26ctl smoke --url ... --model m --timeout T --suite tests/faults/hostile_suite.yaml`
runs as a child; the command's own wall time (measured in the child after its imports), the whole
process's wall time, its peak RSS (from wait4's rusage), its exit code and whether stderr held a
traceback are recorded. Pass: the command's wall < T + 2 s and peak RSS < 300 MB.

`--code DIR` runs the k26ctl found in DIR instead (e.g. an export of an older commit, to compare);
that child gets an address-space limit (`--as-limit-mb`, default 2048) and a kill after
`--kill-after` seconds so an unbounded client cannot take the machine down.

    python3 benchmarks/hostile_server.py                     # this tree
    python3 benchmarks/hostile_server.py --code /tmp/before  # another tree, same servers
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.fake_sglang import HOSTILE_MODES  # noqa: E402

SUITE = REPO / "tests" / "faults" / "hostile_suite.yaml"
SERVER = [sys.executable, "-m", "tests.support.fake_sglang"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start_server(mode: str) -> tuple[subprocess.Popen[bytes], int]:
    port = _free_port()
    proc = subprocess.Popen(
        [*SERVER, "--host", "127.0.0.1", "--port", str(port), "--mode", mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert proc.stdout is not None
    proc.stdout.readline()  # "loading"
    proc.stdout.readline()  # ready line
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc, port
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"fault server ({mode}) did not start")


# The child imports what `smoke` will import and scores one text (the detectors load their word
# lists on first use), then times the command itself: on a shared, loaded machine interpreter
# start-up alone varies by seconds, and the bound is about what the server does to the client.
_CHILD = """
import json, os, sys, time
import rich.console, rich.table, rich.text
import k26ctl.cli.app as app
import k26ctl.smoke.runner, k26ctl.smoke.report, k26ctl.smoke.detectors
k26ctl.smoke.detectors.score_text("Warm up the detectors' word lists once, as any first answer would.")
out = os.dup(1)
devnull = os.open(os.devnull, os.O_WRONLY)
os.dup2(devnull, 1)
sys.argv = ["k26ctl", *json.loads(sys.argv[1])]
started = time.monotonic()
code = 0
try:
    app.main()
except SystemExit as exc:
    code = exc.code if isinstance(exc.code, int) else 1
os.write(out, (json.dumps({"code": code, "smoke_wall": time.monotonic() - started}) + "\\n").encode())
"""


def _run_client(code: Path, port: int, timeout: float, limits: argparse.Namespace) -> dict[str, object]:
    def limit() -> None:
        size = limits.as_limit_mb << 20
        resource.setrlimit(resource.RLIMIT_AS, (size, size))

    args = ["smoke", "--url", f"http://127.0.0.1:{port}", "--model", "m", "--timeout", f"{timeout:g}"]
    args += ["--suite", str(SUITE)]
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-c", _CHILD, json.dumps(args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=code,
        env={**os.environ, "PYTHONPATH": str(code), "NO_COLOR": "1"},
        preexec_fn=limit,
    )
    killed = False
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() - started > limits.kill_after:
            proc.send_signal(signal.SIGKILL)
            killed = True
            _, status, usage = os.wait4(proc.pid, 0)
            break
        time.sleep(0.02)
    wall = time.monotonic() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    stdout = proc.stdout.read().decode() if proc.stdout else ""
    stderr = proc.stderr.read().decode("utf-8", "replace") if proc.stderr else ""
    result = json.loads(stdout.strip().splitlines()[-1]) if stdout.strip() else {}
    return {
        "exit": "killed" if killed else result.get("code", proc.returncode),
        "wall": wall,
        "smoke_wall": result.get("smoke_wall", wall),
        "rss_mb": usage.ru_maxrss / 1024,
        "traceback": "Traceback" in stderr or "MemoryError" in stderr,
        "last": (stderr.strip().splitlines() or [""])[-1][:90],
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--code", type=Path, default=REPO, help="tree whose k26ctl runs (default: this one)")
    parser.add_argument("--timeout", type=float, default=3.0)
    parser.add_argument("--modes", nargs="*", default=list(HOSTILE_MODES))
    parser.add_argument("--as-limit-mb", type=int, default=2048)
    parser.add_argument("--kill-after", type=float, default=60.0)
    args = parser.parse_args()
    bound = args.timeout + 2
    print(
        f"k26ctl from {args.code}; smoke --timeout {args.timeout:g}; bound: smoke < {bound:g} s, RSS < 300 MB"
    )
    print(
        "| mode | exit | smoke s | process s | peak RSS MB | traceback | within bounds | last stderr line |"
    )
    print("|---|---|---|---|---|---|---|---|")
    failures = 0
    for mode in args.modes:
        server, port = _start_server(mode)
        try:
            row = _run_client(args.code, port, args.timeout, args)
        finally:
            server.kill()
            server.wait()
        ok = (
            row["exit"] in (0, 1, 69)
            and float(row["smoke_wall"]) < bound  # type: ignore[arg-type]
            and float(row["rss_mb"]) < 300  # type: ignore[arg-type]
            and not row["traceback"]
        )
        failures += not ok
        print(
            f"| {mode} | {row['exit']} | {row['smoke_wall']:.1f} | {row['wall']:.1f} | {row['rss_mb']:.0f} | "
            f"{'yes' if row['traceback'] else 'no'} | {'yes' if ok else 'NO'} | `{row['last']}` |"
        )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
