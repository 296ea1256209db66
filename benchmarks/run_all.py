#!/usr/bin/env python3
"""Every speed comparison of k26ctl in one run, against the tools an operator would otherwise use.

    python3 benchmarks/run_all.py                 # all comparisons, table on stdout
    python3 benchmarks/run_all.py --rounds 3 --readme   # also rewrite the table in benchmarks/README.md
    python3 benchmarks/run_all.py --real --rounds 2     # the deploy rows against real SGLang 0.5.15

With --real the lab host serves the real SGLang release (bootstrap.sh --real-sglang installs it) and the
profile is profiles/lab/sglang.yaml: the same contenders and the same subtraction, with the real server's
70-110 s start-up as the load time. The stand-in's fault and bisect rows and the companions are left out
(their faults and budgets are the stand-in's).

Deploy overhead is the wall time of a deploy that changes the unit (upload + daemon-reload + restart +
readiness) minus the server's own load time, which is read from the host for every run: from systemd's
ExecMainStartTimestampMonotonic to the journal entry of the server's ready line. The lab host shares
this machine's kernel, so CLOCK_MONOTONIC is one clock on both sides and the two subtract exactly.

Tools compared on the same lab host, the same rendered unit and strict host-key checking:
- `k26ctl deploy` (a real subprocess, as an operator runs it);
- an Ansible playbook (benchmarks/ansible/deploy.yml; ansible-core installed from PyPI into a venv
  under /tmp at run time, not a dependency of the project);
- the hand-written loop (benchmarks/baselines/curl_loop.sh) at 15 s, as the seed deployment ran it,
  and at 1 s.
Plus: time from a service failure to k26ctl's verdict, and the benchmark scripts other parts of the
project keep next to this one (start-up, smoke wall time, bisect restarts, ...), run and summarised.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import platform
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
sys.path.insert(0, str(REPO))

if TYPE_CHECKING:
    from k26ctl.lab.host import LabHostState

ANSIBLE_VENV = Path("/tmp/k26bench-ansible")
ANSIBLE_SPEC = "ansible-core>=2.19,<2.20"
PLAYBOOK = BENCH_DIR / "ansible" / "deploy.yml"
ANSIBLE_CFG = BENCH_DIR / "ansible" / "ansible.cfg"
CURL_LOOP = BENCH_DIR / "baselines" / "curl_loop.sh"
README = BENCH_DIR / "README.md"
TABLE_START = "<!-- run_all:start -->"
TABLE_END = "<!-- run_all:end -->"
# The lab server says this once its HTTP server answers (same words as SGLang's launcher).
DEFAULT_READY_PATTERN = r"fired up and ready to roll"
FAIL_REPORT_FAULTS = ("exit-during-load", "scheduler-crash")
# Scripts other parts keep in benchmarks/; run as they are and summarised in the report.
# (script, arguments) of the benchmarks other parts keep in benchmarks/, sized to run in minutes.
COMPANION_SCRIPTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("startup.py", ("-n", "10")),
    (
        "smoke_walltime.py",
        ("--profiles", "none", "ddtree-b16-patched", "--concurrency", "1", "2", "4", "--repeats", "1"),
    ),
    ("deploy_overhead.py", ("--lab", "t-bench", "--rounds", "3")),
    ("remote_lab.py", ("-n", "2", "--name", "t-bench-remote")),
    ("lab_server.py", ("--rounds", "1")),
    ("detectors.py", ()),
    ("render_large_values.py", ()),
)


# ---- small measurement helpers ------------------------------------------------------------------


@dataclass
class Series:
    """Repeated measurements of one quantity, in seconds (or a count)."""

    values: list[float] = field(default_factory=list)

    def add(self, value: float) -> None:
        self.values.append(value)

    @property
    def median(self) -> float:
        return statistics.median(self.values) if self.values else float("nan")

    def cell(self, digits: int = 2) -> str:
        if not self.values:
            return "n/a"
        if len(self.values) == 1:
            return f"{self.values[0]:.{digits}f}"
        return f"{self.median:.{digits}f} ({min(self.values):.{digits}f}-{max(self.values):.{digits}f})"

    def to_json(self) -> dict[str, Any]:
        return {
            "values": [round(v, 4) for v in self.values],
            "median": round(self.median, 4) if self.values else None,
        }


@dataclass
class Timed:
    seconds: float
    returncode: int
    stdout: str
    stderr: str
    started: float  # time.monotonic() at start (the host's CLOCK_MONOTONIC too)
    ended: float


def timed_run(argv: Sequence[str], *, env: dict[str, str] | None = None, timeout: float = 600) -> Timed:
    start = time.monotonic()
    proc = subprocess.run(list(argv), capture_output=True, text=True, env=env, timeout=timeout, cwd=REPO)
    end = time.monotonic()
    return Timed(end - start, proc.returncode, proc.stdout, proc.stderr, start, end)


def log(message: str) -> None:
    print(f"[run_all {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ---- the lab host, reached the same way the compared tools reach it ----------------------------


@dataclass
class LabShell:
    """Plain `ssh` to the lab host with its key and known_hosts (strict), for reading host state."""

    lab: LabHostState

    def run(self, command: str, *, check: bool = True, timeout: float = 60) -> str:
        proc = subprocess.run(
            [*self.lab.openssh_argv(), command],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and proc.returncode != 0:
            raise RuntimeError(
                f"on the lab host: {command!r} exited {proc.returncode}: {proc.stderr.strip()}"
            )
        return proc.stdout

    def show(self, unit: str, *props: str) -> dict[str, str]:
        out = self.run(f"systemctl show {shlex.quote(unit)} " + " ".join(f"-p {p}" for p in props))
        return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)

    def journal_after(self, unit: str, after_mono_us: int) -> list[tuple[int, str]]:
        """(monotonic µs, message) of the unit's journal entries at or after a monotonic time."""
        out = self.run(f"journalctl -u {shlex.quote(unit)} -o json --no-pager -n 2000", check=False)
        entries: list[tuple[int, str]] = []
        for line in out.splitlines():
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue
            mono = int(entry.get("__MONOTONIC_TIMESTAMP", 0))
            message = entry.get("MESSAGE")
            if isinstance(message, list):  # journald stores non-UTF-8 messages as byte arrays
                message = bytes(message).decode("utf-8", "replace")
            if mono >= after_mono_us and isinstance(message, str):
                entries.append((mono, message))
        return entries


@dataclass
class ServerTimes:
    load: float  # ExecMainStart of the new process -> its ready line
    detect: float  # ready line -> the tool's exit
    stop: float  # systemd's "Stopping" -> "Stopped" of the old process (0 when none ran)


def server_times(shell: LabShell, unit: str, run: Timed, ready_pattern: str) -> ServerTimes | None:
    """The server's own times during `run`, from the host's journal (None: no restart happened)."""
    props = shell.show(unit, "ExecMainStartTimestampMonotonic")
    start_us = int(props.get("ExecMainStartTimestampMonotonic") or 0)
    if start_us < int(run.started * 1e6):
        return None
    entries = shell.journal_after(unit, int(run.started * 1e6))
    stopping = next((m for m, text in entries if text.startswith("Stopping ")), None)
    stopped = next((m for m, text in entries if text.startswith("Stopped ")), None)
    stop = (stopped - stopping) / 1e6 if stopping is not None and stopped is not None else 0.0
    ready = re.compile(ready_pattern)
    for mono, message in entries:
        if mono >= start_us and ready.search(message):
            return ServerTimes((mono - start_us) / 1e6, run.ended - mono / 1e6, stop)
    return None


# ---- the contenders -----------------------------------------------------------------------------


@dataclass
class Bench:
    lab: LabHostState
    shell: LabShell
    profile: str
    base_overrides: list[str]
    unit: str
    unit_dir: str
    port: int
    ready_pattern: str
    workdir: Path
    ansible: Path | None = None
    k26ctl_env: dict[str, str] = field(default_factory=dict)

    # k26ctl --------------------------------------------------------------------------------------
    def k26ctl(self, extra: Sequence[str], *args: str) -> Timed:
        # No smoke: the other tools do not run one either (k26ctl's own is benchmarked on its own).
        argv = [sys.executable, "-m", "k26ctl", "deploy", self.profile, "--yes", "--no-smoke", "--json"]
        for item in [*self.base_overrides, *extra]:
            argv += ["--set", item]
        return timed_run([*argv, *args], env={**os.environ, "NO_COLOR": "1", **self.k26ctl_env})

    # the same unit text, rendered by k26ctl's library ---------------------------------------------
    def render(self, extra: Sequence[str]) -> Path:
        from k26ctl.profile import load_profile
        from k26ctl.render import render_unit

        loaded = load_profile(self.profile, [*self.base_overrides, *extra])
        text = render_unit(loaded.profile)
        path = self.workdir / "sglang.service"
        path.write_text(text)
        return path

    # Ansible ---------------------------------------------------------------------------------------
    def ansible_playbook(self, extra: Sequence[str]) -> Timed:
        assert self.ansible is not None
        unit = self.render(extra)
        template = self.workdir / "sglang.service.j2"
        template.write_text("{% raw %}" + unit.read_text() + "{% endraw %}")
        inventory = self.workdir / "inventory.ini"
        ssh_args = (
            f"-o IdentitiesOnly=yes -o StrictHostKeyChecking=yes "
            f"-o UserKnownHostsFile={self.shell.lab.known_hosts_path}"
        )
        inventory.write_text(
            "[lab]\n"
            f"{self.lab.name} ansible_host={self.shell.lab.address} ansible_port={self.shell.lab.port} "
            "ansible_user=root "
            f"ansible_ssh_private_key_file={self.shell.lab.key_path} ansible_ssh_common_args='{ssh_args}'\n"
        )
        control_dir = Path(tempfile.mkdtemp(prefix="cp-", dir=self.workdir))
        env = {
            **os.environ,
            "ANSIBLE_CONFIG": str(ANSIBLE_CFG),
            "LC_ALL": "C.UTF-8",
            "ANSIBLE_SSH_CONTROL_PATH_DIR": str(control_dir),
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_LOCAL_TEMP": str(self.workdir / "ansible-tmp"),
        }
        try:
            return timed_run(
                [
                    str(self.ansible / "bin" / "ansible-playbook"),
                    "-i",
                    str(inventory),
                    str(PLAYBOOK),
                    "-e",
                    f"unit_name={self.unit}",
                    "-e",
                    f"unit_dir={self.unit_dir}",
                    "-e",
                    f"k26_unit_template={template}",
                    "-e",
                    f"k26_port={self.port}",
                ],
                env=env,
            )
        finally:
            # Each run starts cold, as an operator's does; end the ControlPersist master it left.
            for sock in control_dir.iterdir():
                subprocess.run(["ssh", "-o", f"ControlPath={sock}", "-O", "exit", "lab"], capture_output=True)
            shutil.rmtree(control_dir, ignore_errors=True)

    # the hand-written loop -----------------------------------------------------------------------
    def curl_loop(self, extra: Sequence[str], interval: float) -> Timed:
        unit = self.render(extra)
        return timed_run(
            [
                "bash",
                str(CURL_LOOP),
                self.shell.lab.address,
                self.shell.lab.key_path,
                self.shell.lab.known_hosts_path,
                str(unit),
                str(interval),
                str(self.port),
                f"{self.unit_dir}/{self.unit}",
            ]
        )

    def timing(self, run: Timed) -> ServerTimes | None:
        return server_times(self.shell, self.unit, run, self.ready_pattern)

    def host_unit_sha(self) -> str:
        return self.shell.run(f"sha256sum {self.unit_dir}/{self.unit}").split()[0]


def ensure_ansible(venv: Path) -> tuple[Path | None, str]:
    """ansible-core from PyPI in a venv under /tmp (created once, reused). (venv or None, version/reason)."""
    playbook = venv / "bin" / "ansible-playbook"
    if not playbook.exists():
        log(f"installing {ANSIBLE_SPEC} into {venv}")
        made = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True)
        pip = (
            subprocess.run(
                [str(venv / "bin" / "pip"), "install", "-q", ANSIBLE_SPEC], capture_output=True, text=True
            )
            if made.returncode == 0
            else made
        )
        if pip.returncode != 0 or not playbook.exists():
            return None, f"ansible-core could not be installed: {pip.stderr.strip()[-300:]}"
    version = subprocess.run(
        [str(venv / "bin" / "ansible"), "--version"],
        capture_output=True,
        text=True,
        env={**os.environ, "LC_ALL": "C.UTF-8"},
    )
    first = version.stdout.splitlines()[0] if version.stdout else "ansible (unknown version)"
    return venv, first.strip()


# ---- the comparisons ----------------------------------------------------------------------------


@dataclass
class Row:
    what: str
    tool: str
    series: Series
    unit: str = "s"
    note: str = ""


@dataclass
class Report:
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    companions: dict[str, str] = field(default_factory=dict)
    steps: dict[str, Series] = field(default_factory=dict)  # k26ctl's steps in changed deploys
    machine: dict[str, str] = field(default_factory=dict)
    command: str = ""

    def row(self, what: str, tool: str, unit: str = "s", note: str = "") -> Series:
        series = Series()
        self.rows.append(Row(what, tool, series, unit, note))
        return series

    def step(self, name: str) -> Series:
        return self.steps.setdefault(name, Series())

    def find(self, what: str, tool: str) -> Series | None:
        return next((r.series for r in self.rows if r.what == what and r.tool == tool), None)


def _ensure_ok(run: Timed, what: str) -> None:
    if run.returncode != 0:
        tail = (run.stderr or run.stdout).strip().splitlines()[-8:]
        raise RuntimeError(f"{what} exited {run.returncode}:\n  " + "\n  ".join(tail))


def bench_deploys(
    bench: Bench, report: Report, rounds: int, slow_rounds: int, counter: Callable[[], int]
) -> None:
    tools = ["k26ctl", "ansible-playbook", "ssh+curl loop, 1 s", "ssh+curl loop, 15 s"]
    measures = {
        "wall": "deploy with a change: wall",
        "over": "deploy with a change: overhead (wall - server load)",
        "net": "deploy with a change: overhead net of the old server's stop (wall - load - stop)",
        "det": "server ready -> verdict",
    }
    rows = {(key, tool): report.row(what, tool) for key, what in measures.items() for tool in tools}
    load = report.row("server's own load time (ExecMainStart -> ready line)", "all runs")
    stop = report.row("old server's stop time (systemd Stopping -> Stopped)", "all runs")
    k_same = report.row("deploy with no change: wall", "k26ctl")
    a_same = report.row("deploy with no change: wall", "ansible-playbook")

    def record(run: Timed, tool: str) -> None:
        times = bench.timing(run)
        if times is None:
            report.notes.append("a run without a measurable restart was left out (ready line not found)")
            return
        load.add(times.load)
        stop.add(times.stop)
        rows["wall", tool].add(run.seconds)
        rows["over", tool].add(run.seconds - times.load)
        rows["net", tool].add(run.seconds - times.load - times.stop)
        rows["det", tool].add(times.detect)

    for i in range(rounds):
        change = [f"service.environment.K26BENCH_ROUND={counter()}"]
        log(f"round {i + 1}/{rounds}: k26ctl deploy")
        run = bench.k26ctl(change)
        _ensure_ok(run, "k26ctl deploy")
        record(run, "k26ctl")
        record_steps(report, run)
        run = bench.k26ctl(change)
        _ensure_ok(run, "k26ctl deploy (no change)")
        k_same.add(run.seconds)

        if bench.ansible is not None:
            change = [f"service.environment.K26BENCH_ROUND={counter()}"]
            log(f"round {i + 1}/{rounds}: ansible-playbook")
            run = bench.ansible_playbook(change)
            _ensure_ok(run, "ansible-playbook")
            record(run, "ansible-playbook")
            if i == 0:
                expected = bench.render(change).read_bytes()
                import hashlib

                if hashlib.sha256(expected).hexdigest() != bench.host_unit_sha():
                    report.notes.append("Ansible's installed unit differs from k26ctl's rendering")
            run = bench.ansible_playbook(change)
            _ensure_ok(run, "ansible-playbook (no change)")
            a_same.add(run.seconds)

        log(f"round {i + 1}/{rounds}: ssh+curl loop, 1 s")
        run = bench.curl_loop([f"service.environment.K26BENCH_ROUND={counter()}"], 1)
        _ensure_ok(run, "curl loop (1 s)")
        record(run, "ssh+curl loop, 1 s")
        if i < slow_rounds:
            log(f"round {i + 1}/{rounds}: ssh+curl loop, 15 s")
            run = bench.curl_loop([f"service.environment.K26BENCH_ROUND={counter()}"], 15)
            _ensure_ok(run, "curl loop (15 s)")
            record(run, "ssh+curl loop, 15 s")


def record_steps(report: Report, run: Timed) -> None:
    """Where k26ctl's own time goes, from its --json step list (process start-up = wall - in-process)."""
    try:
        document = json.loads(run.stdout)
    except json.JSONDecodeError:
        return
    for step in document.get("steps", []):
        report.step(step["name"]).add(float(step["seconds"]))
    inside = float(document.get("wall_seconds") or 0)
    if inside:
        report.step("(process start-up and exit)").add(run.seconds - inside)


def bench_failure_report(bench: Bench, report: Report, rounds: int, counter: Callable[[], int]) -> None:
    """A server that fails after the restart: seconds from the failure on the host to k26ctl's exit."""
    for fault in FAIL_REPORT_FAULTS:
        series = report.row(f"service failure ({fault}) -> k26ctl verdict", "k26ctl")
        for _ in range(rounds):
            change = [
                f"service.environment.K26BENCH_ROUND={counter()}",
                f"service.environment.K26LAB_FAULT={fault}",
            ]
            run = bench.k26ctl(change)
            if run.returncode != 1:
                report.notes.append(f"{fault}: k26ctl exited {run.returncode}, expected 1")
                continue
            failed_at = failure_time(bench, run)
            if failed_at is None:
                report.notes.append(f"{fault}: the failure was not found on the host")
                continue
            series.add(run.ended - failed_at)
        # back to a healthy server for what follows
        _ensure_ok(
            bench.k26ctl([f"service.environment.K26BENCH_ROUND={counter()}"]), "k26ctl deploy (recover)"
        )


def failure_time(bench: Bench, run: Timed) -> float | None:
    """Monotonic seconds of the first sign of failure on the host: the server's first traceback line in
    the journal (it logs one before it exits, or while it lives on) or the main process's exit."""
    props = bench.shell.show(bench.unit, "ExecMainStartTimestampMonotonic", "ExecMainExitTimestampMonotonic")
    since_us = max(int(props.get("ExecMainStartTimestampMonotonic") or 0), int(run.started * 1e6))
    exit_us = int(props.get("ExecMainExitTimestampMonotonic") or 0)
    signs = [exit_us] if exit_us >= since_us else []
    fatal = re.compile(r"Traceback \(most recent call last\)")
    signs += [
        mono for mono, message in bench.shell.journal_after(bench.unit, since_us) if fatal.search(message)
    ][:1]
    return min(signs) / 1e6 if signs else None


def bench_smoke(bench: Bench, report: Report, rounds: int) -> None:
    """`k26ctl smoke` against the lab server on the lab host (through its SSH forward): suite wall time
    against its longest single request and against the same requests one at a time."""
    for suite in ("default", "lab"):
        wall = report.row(f"smoke, {suite} suite: wall (concurrency 2)", "k26ctl smoke")
        longest = report.row(f"smoke, {suite} suite: longest single request", "k26ctl smoke")
        ratio = report.row(
            f"smoke, {suite} suite: wall / longest request (aim < 2)", "k26ctl smoke", unit="count"
        )
        total = report.row(f"smoke, {suite} suite: sum of request latencies", "k26ctl smoke")
        sequential = report.row(
            f"smoke, {suite} suite: wall (concurrency 1, requests in sequence)", "k26ctl smoke"
        )
        wide = report.row(
            f"smoke, {suite} suite: wall / longest request at concurrency 8", "k26ctl smoke", unit="count"
        )
        for _ in range(rounds):
            for concurrency in (2, 1, 8):
                argv = [
                    sys.executable,
                    "-m",
                    "k26ctl",
                    "smoke",
                    bench.profile,
                    "--suite",
                    suite,
                    "--json",
                    "--concurrency",
                    str(concurrency),
                ]
                for item in bench.base_overrides:
                    argv += ["--set", item]
                run = timed_run(argv, env={**os.environ, "NO_COLOR": "1"})
                try:
                    document = json.loads(run.stdout)
                except json.JSONDecodeError:
                    report.notes.append(f"smoke ({suite}): no JSON result (exit {run.returncode})")
                    continue
                elapsed = [float(r["elapsed_s"]) for r in document["results"] if r.get("elapsed_s")]
                if concurrency == 1:
                    sequential.add(float(document["wall_seconds"]))
                    continue
                if concurrency == 8:
                    if elapsed:
                        wide.add(float(document["wall_seconds"]) / max(elapsed))
                    continue
                wall.add(float(document["wall_seconds"]))
                if elapsed:
                    longest.add(max(elapsed))
                    ratio.add(float(document["wall_seconds"]) / max(elapsed))
                    total.add(sum(elapsed))
    report.notes.append(
        "smoke: the default suite is written for real models; the tiny lab model fails its prompt checks, "
        "only its timing is used here"
    )


# (candidates, first bad value): a setting whose values from 1 up to the first bad one work; judged by a
# command, so each step's cost is the deploy and restart alone.
BISECT_CASES = ((16, 11), (64, 40))


def bench_bisect(bench: Bench, report: Report) -> None:
    """Restarts used by `k26ctl bisect-config` (real deploys on the lab host, ends verified) against a
    linear sweep that deploys the values in order from the good end until the first bad one."""
    for candidates, first_bad in BISECT_CASES:
        what = f"restarts to find the first bad of {candidates} values (first bad {first_bad})"
        argv = [
            sys.executable,
            "-m",
            "k26ctl",
            "bisect-config",
            bench.profile,
            "--param",
            "sglang.max_running_requests",
            "--good",
            "1",
            "--bad",
            str(candidates),
            "--run",
            f'sh -c "test $K26_BISECT_VALUE -lt {first_bad}"',
            "--session",
            "run-all-bench",
            "--yes",
            "--json",
        ]
        for item in bench.base_overrides:
            argv += ["--set", item]
        log(f"bisect over {candidates} values")
        run = timed_run(argv, env={**os.environ, "NO_COLOR": "1"}, timeout=1800)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "k26ctl",
                "bisect-config",
                "reset",
                "--session",
                "run-all-bench",
                "--keep-deployment",
                "--yes",
            ],
            capture_output=True,
            cwd=REPO,
        )
        try:
            document = json.loads(run.stdout)
        except json.JSONDecodeError:
            tail = " / ".join(run.stderr.strip().splitlines()[-3:])
            report.notes.append(
                f"bisect over {candidates} values: no JSON result (exit {run.returncode}): {tail}"
            )
            continue
        if document.get("first_bad") != first_bad:
            report.notes.append(
                f"bisect over {candidates} values found {document.get('first_bad')}, not {first_bad}"
            )
        report.row(what, "k26ctl bisect-config", unit="count").add(float(document["restarts"]))
        report.row(what, "linear sweep from the good end", unit="count").add(float(first_bad - 1))
        report.row(what, "sweep of every value", unit="count").add(float(candidates))
        report.row(f"bisect over {candidates} values: wall", "k26ctl bisect-config").add(run.seconds)


def run_companions(report: Report, scripts: Sequence[tuple[str, tuple[str, ...]]], timeout: float) -> None:
    """Run the other benchmark scripts as they are and keep their output for the report."""
    for name, args in scripts:
        script = BENCH_DIR / name
        if not script.exists():
            report.companions[name] = "(not present in this checkout)"
            continue
        log(f"companion {name} {' '.join(args)}")
        try:
            run = timed_run([sys.executable, str(script), *args], timeout=timeout)
        except subprocess.TimeoutExpired:
            report.companions[name] = f"(timed out after {timeout:.0f} s)"
            continue
        body = run.stdout.strip() or run.stderr.strip()[-2000:]
        status = "" if run.returncode == 0 else f"(exited {run.returncode})\n"
        shown = f"python3 benchmarks/{name} {' '.join(args)}".strip()
        report.companions[name] = f"`{shown}` ({run.seconds:.0f} s)\n\n{status}```\n{body}\n```"


# ---- the fault matrix (observations written by tests/faults with K26CTL_FAULT_MATRIX=FILE) ----------

MATRIX_START = "<!-- fault_matrix:start -->"
MATRIX_END = "<!-- fault_matrix:end -->"
EXPECTED = {
    "Ctrl-C during": "exit 130 saying which unit is in place; old unit before apply, new after; lock freed",
    "two deploys at once": "the second is refused by the host lock (exit 1, names the holder)",
    "sshd down": "exit 69, nothing changed, the old server keeps running",
    "host key changed": "exit 69 naming the host key, even with --accept-new-host-key; nothing changed",
    "connection cut during upload": "exit 69 (connection lost); the old unit, no temp file; converges after",
    "connection cut during readiness": "rides it out (exit 0) or exit 69; the new unit, service running",
    "health endpoint": "exit 1 once readiness.timeout passes, naming the last probe; the new unit",
    "health hangs, --rollback-on-failure": "exit 1, then the old unit restored and the old server ready",
    "crash loop": "exit 1 within seconds with the server's error line; systemd's start limit reached",
    "disk full": "a clear error naming the lack of space; the old unit, no temp file",
    "server dies mid-smoke": "exit 1 or 69 naming the lost server; the new unit, service state known",
}


def _expected(fault: str) -> str:
    return next((text for prefix, text in EXPECTED.items() if fault.startswith(prefix)), "")


def fault_matrix(path: Path) -> str:
    """Markdown rows from the observations of the last tests/faults run (the last record per fault)."""
    records: dict[str, dict[str, Any]] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            record = json.loads(line)
            records[record["fault"]] = record
    lines = [
        "| fault | expected | observed exit | message | host afterwards |",
        "| --- | --- | --- | --- | --- |",
    ]
    for fault, r in records.items():
        host = f"{r['unit']} unit, service {r['service']}"
        if r["daemon_reload_pending"]:
            host += ", daemon-reload pending"
        if r["leftovers"]:
            host += f", leftovers {r['leftovers']}"
        message = r["message"].replace("|", "\\|")
        lines.append(f"| {fault} | {_expected(fault)} | {r['exit']} | `{message}` | {host} |")
    return "\n".join(lines) + "\n"


# ---- presentation -------------------------------------------------------------------------------


def machine_info() -> dict[str, str]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_kib = 0
    with contextlib.suppress(OSError, ValueError, IndexError):
        mem_kib = int(Path("/proc/meminfo").read_text().split()[1])
    return {
        "cpu": f"{cpu}, {os.cpu_count()} cores",
        "memory": f"{mem_kib / 2**20:.0f} GiB",
        "kernel": platform.release(),
        "os": _os_name(),
        "python": platform.python_version(),
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }


def _os_name() -> str:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip('"')
    except OSError:
        pass
    return platform.system()


def ratio(report: Report, what: str, tool: str, base_tool: str = "k26ctl") -> str:
    mine, other = report.find(what, base_tool), report.find(what, tool)
    if not mine or not other or not mine.values or not other.values or mine.median <= 0:
        return ""
    return f"{other.median / mine.median:.1f}x k26ctl"


def to_markdown(report: Report) -> str:
    lines = [f"Command: `{report.command}`", ""]
    lines.append("Machine: " + "; ".join(f"{k} {v}" for k, v in report.machine.items()))
    lines += [
        "",
        "| measurement | tool | median (min-max) | n | vs k26ctl |",
        "| --- | --- | --- | --- | --- |",
    ]
    for row in report.rows:
        if not row.series.values:
            continue
        unit = "" if row.unit == "count" else " s"
        rel = ratio(report, row.what, row.tool) if row.tool != "k26ctl" else ""
        lines.append(
            f"| {row.what} | {row.tool} | {row.series.cell()}{unit} | {len(row.series.values)} | {rel} |"
        )
    if report.steps:
        lines += [
            "",
            "Where a changed `k26ctl deploy` spends its time (from its `--json` steps):",
            "",
            "| step | median (min-max) |",
            "| --- | --- |",
        ]
        lines += [f"| {name} | {series.cell()} s |" for name, series in report.steps.items()]
    if report.notes:
        lines += ["", "Notes:"] + [f"- {n}" for n in dict.fromkeys(report.notes)]
    for name, body in report.companions.items():
        lines += ["", f"#### `benchmarks/{name}`", "", body]
    return "\n".join(lines) + "\n"


def update_readme(markdown: str, start: str = TABLE_START, end: str = TABLE_END) -> None:
    text = README.read_text() if README.exists() else ""
    block = f"{start}\n{markdown}{end}"
    if start in text and end in text:
        head, rest = text.split(start, 1)
        tail = rest.split(end, 1)[1]
        text = head + block + tail
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    README.write_text(text)


# ---- main ---------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lab", default="t-bench", help="lab host name (brought up if needed)")
    parser.add_argument("--profile", help="default: profiles/lab/none.yaml, or sglang.yaml with --real")
    parser.add_argument("--real", action="store_true", help="real SGLang 0.5.15 instead of the stand-in")
    parser.add_argument("--rounds", type=int, default=5, help="changed deploys per tool")
    parser.add_argument(
        "--slow-rounds", type=int, default=2, help="rounds of the 15-s loop (about 18 s each)"
    )
    parser.add_argument("--fail-rounds", type=int, default=3, help="failure-report runs per fault")
    parser.add_argument("--load-seconds", type=float, default=3.0, help="K26LAB_LOAD_SECONDS for the server")
    parser.add_argument("--ready-pattern", default=DEFAULT_READY_PATTERN)
    parser.add_argument(
        "--skip", default="", help="comma list: ansible,curl,deploy,failure,smoke,bisect,companions"
    )
    parser.add_argument("--out", default="/tmp/k26bench", help="directory for results.json and results.md")
    parser.add_argument("--readme", action="store_true", help="rewrite the table in benchmarks/README.md")
    parser.add_argument("--down", action="store_true", help="stop the lab host at the end")
    parser.add_argument("--companion-timeout", type=float, default=600)
    parser.add_argument(
        "--fault-matrix",
        metavar="JSONL",
        help="only print the fault matrix from tests/faults observations (K26CTL_FAULT_MATRIX=JSONL)",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.fault_matrix:
        matrix = fault_matrix(Path(args.fault_matrix))
        if args.readme:
            update_readme(matrix, MATRIX_START, MATRIX_END)
        print(matrix)
        return 0
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    if args.real:
        skip |= {"failure", "bisect", "companions"}
    args.profile = args.profile or str(
        REPO / "profiles" / "lab" / ("sglang.yaml" if args.real else "none.yaml")
    )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report = Report(
        command="python3 benchmarks/run_all.py " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    )
    report.machine = machine_info()

    from k26ctl.lab.host import lab_down, lab_up
    from k26ctl.profile import load_profile
    from k26ctl.render import unit_name

    log(f"lab host {args.lab}")
    if args.real:
        from k26ctl.lab.real.releases import RELEASES

        lab = lab_up(args.lab, real_sglang=RELEASES[:1])
        report.machine["server"] = f"real SGLang {RELEASES[0]} (CPU)"
        base = [f"host.lab={args.lab}"]
    else:
        lab = lab_up(args.lab)
        report.machine["server"] = "the lab stand-in"
        base = [f"host.lab={args.lab}", f"service.environment.K26LAB_LOAD_SECONDS={args.load_seconds:g}"]
    shell = LabShell(lab)
    profile = load_profile(args.profile, base).profile
    serial = iter(range(int(time.time() * 1000) % 10**9, 10**12))
    with tempfile.TemporaryDirectory(prefix="k26bench-") as tmp:
        bench = Bench(
            lab=lab,
            shell=shell,
            profile=args.profile,
            base_overrides=base,
            unit=unit_name(profile),
            unit_dir=profile.service.unit_dir,
            port=profile.sglang.port,
            ready_pattern=args.ready_pattern,
            workdir=Path(tmp),
        )
        try:
            if "ansible" not in skip:
                bench.ansible, version = ensure_ansible(ANSIBLE_VENV)
                report.machine["ansible"] = version
            if "deploy" not in skip:
                log("warm-up deploy")
                _ensure_ok(
                    bench.k26ctl([f"service.environment.K26BENCH_ROUND={next(serial)}"]), "warm-up deploy"
                )
                bench_deploys(
                    bench,
                    report,
                    args.rounds,
                    0 if "curl" in skip else args.slow_rounds,
                    lambda: next(serial),
                )
            if "failure" not in skip:
                bench_failure_report(bench, report, args.fail_rounds, lambda: next(serial))
            if "smoke" not in skip:
                bench_smoke(bench, report, 2)
            if "bisect" not in skip:
                bench_bisect(bench, report)
        finally:
            if args.down:
                lab_down(args.lab)
    if "companions" not in skip:
        run_companions(report, COMPANION_SCRIPTS, args.companion_timeout)

    markdown = to_markdown(report)
    (out / "results.md").write_text(markdown)
    (out / "results.json").write_text(
        json.dumps(
            {
                "machine": report.machine,
                "rows": [{"what": r.what, "tool": r.tool, **r.series.to_json()} for r in report.rows],
                "notes": report.notes,
            },
            indent=2,
        )
    )
    if args.readme:
        update_readme(markdown)
    print(markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
