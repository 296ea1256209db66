"""One fault scenario on the lab host: a known old state, a new profile, a real `k26ctl deploy`
subprocess to disturb, and the checks that the host ended in the old or the new state."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

import yaml

from k26ctl.lab.host import INNER_PROJECT_DIR
from tests.support.cli import CliResult, run_k26ctl, spawn_k26ctl

from .helpers import REPO
from .hostctl import HostCtl

FAULTS_DIR = REPO / "tests" / "faults"
KNOWN_STATES = {"active", "activating", "failed", "inactive", "deactivating", "reloading"}


def fault_profile(lab_name: str) -> dict[str, object]:
    """A profile whose service is tests/support/fake_sglang.py (starts in a fraction of a second)."""
    return {
        "name": "faults",
        "description": "fault-injection target",
        "host": {"address": "", "lab": lab_name, "command_timeout": 15, "connect_timeout": 5},
        "service": {
            "name": "sglang",
            "description": "fault server",
            "path": "/opt/k26lab/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "cuda_home": None,
            "restart_sec": 1,
            "start_limit_burst": 3,
            "start_limit_interval_sec": 60,
            "timeout_stop_sec": 5,
            "environment": {
                # the lab host sees the project at INNER_PROJECT_DIR whatever the checkout's path (a
                # checkout under /tmp is hidden from a PrivateTmp=yes service)
                "PYTHONPATH": INNER_PROJECT_DIR,
                "FAULT_MODE": "ok",
                "FAULT_LOAD_SECONDS": "0.3",
            },
        },
        "sglang": {
            "python": "/opt/k26lab/venv/bin/python",
            "entrypoint": "tests.support.fake_sglang",
            "model_path": "/opt/k26lab/models/k26lab-tiny",
            "served_model_name": "fault-model",
            "tp_size": 1,
            "attention_backend": None,
            "trust_remote_code": False,
            "enable_metrics": False,
            "port": 30000,
        },
        "readiness": {"timeout": 20, "poll_initial": 0.5},
        "smoke": {"timeout": 10, "suite": str(FAULTS_DIR / "fault_suite.yaml")},
    }


class Scenario:
    def __init__(self, host: HostCtl, tmp: Path) -> None:
        self.host = host
        self.tmp = tmp
        self.profile = tmp / "faults.yaml"
        self.profile.write_text(yaml.safe_dump(fault_profile(host.lab.name), sort_keys=False))
        self.old_sha: str | None = None
        self.tag = uuid.uuid4().hex[:8]

    # ---- profiles ------------------------------------------------------------------------------------
    def sets(self, label: str, **env: str) -> list[str]:
        items = [f"service.environment.FAULT_ROUND={label}-{self.tag}"]
        items += [f"service.environment.{k}={v}" for k, v in env.items()]
        return items

    def expected_sha(self, sets: Sequence[str]) -> str:
        from k26ctl.profile import load_profile
        from k26ctl.render import render_unit

        text = render_unit(load_profile(self.profile, list(sets)).profile)
        return hashlib.sha256(text.encode()).hexdigest()

    def argv(self, sets: Sequence[str], *extra: str, command: str = "deploy") -> list[str]:
        argv = [command, str(self.profile), "--yes"]
        for item in sets:
            argv += ["--set", item]
        return [*argv, *extra]

    # ---- running k26ctl -------------------------------------------------------------------------------
    def deploy(self, sets: Sequence[str], *extra: str, timeout: float = 90) -> CliResult:
        return run_k26ctl(*self.argv(sets, *extra), timeout=timeout, env={"K26CTL_YES": "1"})

    def start(self, sets: Sequence[str], *extra: str, command: str = "deploy") -> Running:
        # faulthandler: a k26ctl that hangs is made to print every thread's stack before it is killed
        env = {"K26CTL_YES": "1", "PYTHONUNBUFFERED": "1", "PYTHONFAULTHANDLER": "1"}
        proc = spawn_k26ctl(*self.argv(sets, *extra, command=command), env=env)
        return Running(proc)

    def establish_old(self) -> None:
        sets = self.sets("old")
        run = self.deploy(sets, "--no-smoke")
        assert run.returncode == 0, f"could not establish the old state: {run.output[-3000:]}"
        self.old_sha = self.host.unit_sha()
        assert self.old_sha == self.expected_sha(sets), "the host's unit is not the rendered one"
        assert self.host.wait_active() == "active"

    # ---- verdicts --------------------------------------------------------------------------------------
    def old_or_new(self, new_sets: Sequence[str], fault: str = "", run: CliResult | None = None) -> str:
        """'old' or 'new' for the unit on the host, asserting that it is one of them, whole. With a
        fault name and its run, the observation is also appended to $K26CTL_FAULT_MATRIX (JSON lines)
        for the fault matrix in benchmarks/README.md."""
        sha = self.host.unit_sha()
        new_sha = self.expected_sha(new_sets)
        state = "old" if sha == self.old_sha else "new" if sha == new_sha else "NEITHER"
        leftovers = self.host.leftovers_in(self.host.unit_dir)
        if fault and run is not None:
            self._observe(fault, run, state, leftovers)
        assert state != "NEITHER", f"unit on the host is neither old nor new (sha {sha})"
        assert not leftovers, f"temporary files left in {self.host.unit_dir}: {leftovers}"
        return state

    def _observe(self, fault: str, run: CliResult, state: str, leftovers: list[str]) -> None:
        path = os.environ.get("K26CTL_FAULT_MATRIX")
        if not path:
            return
        said = _what_it_said(run)
        record = {
            "fault": fault,
            "exit": run.returncode,
            "message": said[:240],
            "unit": state,
            "leftovers": leftovers,
            "daemon_reload_pending": self.host.needs_daemon_reload(),
            "service": self.host.active_state(),
        }
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps(record) + "\n")

    def service_state(self) -> str:
        state = self.host.active_state()
        assert state in KNOWN_STATES, state
        return state

    def assert_recovers(self, sets: Sequence[str]) -> None:
        """The host is not wedged: the same deploy, run again without the fault, converges."""
        run = self.deploy(sets, "--no-smoke")
        assert run.returncode == 0, f"deploy after the fault did not converge: {run.output[-3000:]}"
        assert self.host.unit_sha() == self.expected_sha(sets)
        assert not self.host.needs_daemon_reload()
        assert self.host.wait_active() == "active"


def _what_it_said(run: CliResult) -> str:
    """The error (its first and last line when it spans several) or the deploy's verdict line."""
    lines = run.stderr.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("error:"):
            block = [line]
            for more in lines[i + 1 :]:
                if more.lstrip().startswith("hint:"):
                    break
                block.append(more.strip())
            return block[0] if len(block) == 1 else f"{block[0]} [...{len(block) - 2} lines...] {block[-1]}"
    return next(
        (line for line in run.output.splitlines() if re.search(r": (failed|interrupted) - ", line)), ""
    )


class Running:
    """A k26ctl subprocess whose stderr is read line by line as it comes."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.lines: list[str] = []
        self._new_line = threading.Condition()
        self._stdout: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._out_reader = threading.Thread(target=self._read_stdout, daemon=True)
        self._out_reader.start()

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        self._stdout.append(self.proc.stdout.read())

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self._new_line:
                self.lines.append(line.rstrip("\n"))
                self._new_line.notify_all()
        with self._new_line:
            self._new_line.notify_all()

    def wait_for(self, pattern: str, timeout: float = 30) -> str | None:
        """The first stderr line matching `pattern` (None when the process ended or time ran out)."""
        regex = re.compile(pattern, re.IGNORECASE)
        deadline = time.monotonic() + timeout
        seen = 0
        with self._new_line:
            while True:
                for line in self.lines[seen:]:
                    if regex.search(line):
                        return line
                seen = len(self.lines)
                if not self._reader.is_alive() or time.monotonic() > deadline:
                    return None
                self._new_line.wait(0.1)

    def interrupt(self) -> None:
        self.proc.send_signal(signal.SIGINT)

    def finish(self, timeout: float = 60) -> CliResult:
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGABRT)  # faulthandler prints where each thread waits
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self._reader.join(5)
            stacks = "\n".join(self.lines[-80:])
            raise AssertionError(f"k26ctl did not end within {timeout:.0f} s:\n{stacks}") from None
        self._reader.join(5)
        self._out_reader.join(5)
        return CliResult(self.proc.returncode, "".join(self._stdout), "\n".join(self.lines) + "\n")
