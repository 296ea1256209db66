"""Run k26ctl the way a user does: `python -m k26ctl ...` as a child process of the checkout under test,
or, where a test asks only what a command says and returns, through the console entry in this process
(`run_here`, `run_in_process`): a child costs about 0.45 s of interpreter start-up, which the tests of
start-up itself (tests/structure) and every lab test still pay."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class CliResult:
    returncode: int
    stdout: str
    stderr: str
    exception: BaseException | None = None  # set only by run_in_process, when something escaped main()

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def k26ctl_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "k26ctl", *args]


def cli_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment without colour or a standing K26CTL_YES, the checkout under test first
    on PYTHONPATH, then `extra` on top."""
    env = {key: value for key, value in os.environ.items() if key != "K26CTL_YES"}
    env["NO_COLOR"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env.update(extra or {})
    return env


def run_k26ctl(
    *args: str,
    env: Mapping[str, str] | None = None,
    timeout: float = 120,
    stdin: str | None = None,
    cwd: Path = ROOT,
) -> CliResult:
    """`k26ctl ARGS` to completion with stdin from `stdin` (no TTY: plain progress lines on stderr)."""
    stdin_source: dict[str, Any] = {"input": stdin} if stdin is not None else {"stdin": subprocess.DEVNULL}
    proc = subprocess.run(
        k26ctl_argv(*args),
        capture_output=True,
        text=True,
        timeout=timeout,
        env=cli_env(env),
        cwd=cwd,
        **stdin_source,
    )
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


def k26_json(*args: str, timeout: float = 240, env: Mapping[str, str] | None = None) -> tuple[int, Any]:
    """`k26ctl ARGS --json`: its exit code and its one JSON document (an assertion error with both
    streams where stdout is not one)."""
    import json

    proc = run_k26ctl(*args, "--json", timeout=timeout, env=env)
    try:
        doc = json.loads(proc.stdout)
    except ValueError:
        raise AssertionError(
            f"not one JSON document (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
        ) from None
    return proc.returncode, doc


def spawn_k26ctl(
    *args: str,
    env: Mapping[str, str] | None = None,
    cwd: Path = ROOT,
    stdin: int | IO[Any] | None = subprocess.DEVNULL,
    stdout: int | IO[Any] | None = subprocess.PIPE,
    stderr: int | IO[Any] | None = subprocess.PIPE,
) -> subprocess.Popen[str]:
    """`k26ctl ARGS` started and left running, for tests that signal it or read its output as it comes."""
    return subprocess.Popen(
        k26ctl_argv(*args), stdin=stdin, stdout=stdout, stderr=stderr, text=True, env=cli_env(env), cwd=cwd
    )


def run_in_process(args: Sequence[str]) -> CliResult:
    """`k26ctl ARGS` through `k26ctl.cli.app.main` in this process, exactly as the console script runs
    it (K26Error -> one line + exit code). Any other exception lands in the result, not the test."""
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
    return CliResult(code, out.getvalue(), err.getvalue(), exception)


def run_here(
    *args: str, env: Mapping[str, str] | None = None, stdin: str | None = None, cwd: Path = ROOT
) -> CliResult:
    """`k26ctl ARGS` as run_k26ctl runs it (from `cwd`, cli_env's environment, stdin from `stdin` or
    empty), through the console entry in this process; state and environment are put back
    afterwards. Anything that escapes main() fails the test, as a traceback in a child would."""
    saved_env, saved_cwd, saved_stdin = dict(os.environ), os.getcwd(), sys.stdin
    os.environ.clear()
    os.environ.update(cli_env(env))
    sys.stdin = io.TextIOWrapper(io.BytesIO((stdin or "").encode()), encoding="utf-8")
    os.chdir(cwd)
    try:
        result = run_in_process(args)
    finally:
        os.chdir(saved_cwd)
        sys.stdin = saved_stdin
        os.environ.clear()
        os.environ.update(saved_env)
    if result.exception is not None:
        raise AssertionError(f"k26ctl {' '.join(args)} raised") from result.exception
    return result
