"""Shared helpers for the fault and hostile-input tests: run the real CLI entry point in-process (fast enough
for hypothesis) or as a subprocess (for signals, resource limits and concurrency)."""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LAB_PROFILES = REPO / "profiles" / "lab"


@dataclass(frozen=True)
class CliRun:
    exit_code: int
    stdout: str
    stderr: str
    exception: BaseException | None = None

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def run_cli(args: Sequence[str]) -> CliRun:
    """`k26ctl ARGS` through `k26ctl.cli.app.main` in this process, exactly as the console script runs
    it (K26Error -> one line + exit code). Any other exception escapes into the result, not the test."""
    from k26ctl.cli.app import main

    out, err = io.StringIO(), io.StringIO()
    old_argv = sys.argv
    sys.argv = ["k26ctl", *args]
    code = 0
    exception: BaseException | None = None
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException as exc:
        exception = exc
        code = -1
    finally:
        sys.argv = old_argv
    return CliRun(code, out.getvalue(), err.getvalue(), exception)


def k26ctl_argv() -> list[str]:
    return [sys.executable, "-m", "k26ctl"]


def run_k26ctl(args: Sequence[str], *, timeout: float = 120, env: dict[str, str] | None = None) -> CliRun:
    """`k26ctl ARGS` as a separate process (no TTY, so plain progress lines on stderr)."""
    full_env = {**os.environ, "NO_COLOR": "1", "K26CTL_YES": "1", **(env or {})}
    proc = subprocess.run(
        [*k26ctl_argv(), *args], capture_output=True, text=True, timeout=timeout, env=full_env, cwd=REPO
    )
    return CliRun(proc.returncode, proc.stdout, proc.stderr)


def assert_clean_failure(run: CliRun, codes: Sequence[int]) -> None:
    """A failure the way the CLI promises it: a listed exit code, an `error:` line, no traceback."""
    assert run.exception is None, f"exception escaped the CLI: {run.exception!r}"
    assert "Traceback" not in run.output, run.output
    assert run.exit_code in codes, f"exit {run.exit_code} not in {list(codes)}: {run.output[-2000:]}"
    if run.exit_code not in (0, 2):
        # an error line, or the verdict line of a deploy that ran and failed ("...: failed - reason")
        lines = [line for line in run.output.splitlines() if line.strip()]
        said = any(line.startswith("error:") or re.search(r": failed - \S", line) for line in lines)
        assert said, run.output[-3000:]


def have_lab_prerequisites() -> str | None:
    """Why a lab host cannot boot here, or None when it can."""
    import shutil

    if os.geteuid() != 0:
        return "needs root"
    for tool in ("systemd-nspawn", "ip"):
        if shutil.which(tool) is None:
            return f"{tool} not installed"
    if not Path("/usr/sbin/sshd").exists():
        return "openssh-server not installed"
    return None
