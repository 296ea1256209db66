"""Checks shared by the fault and hostile-input tests: a clean CLI failure; can a lab host boot here."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

from tests.support.cli import CliResult

REPO = Path(__file__).resolve().parents[2]
LAB_PROFILES = REPO / "profiles" / "lab"


def assert_clean_failure(run: CliResult, codes: Sequence[int]) -> None:
    """A failure the way the CLI promises it: a listed exit code, an `error:` line, no traceback."""
    assert run.exception is None, f"exception escaped the CLI: {run.exception!r}"
    assert "Traceback" not in run.output, run.output
    assert run.returncode in codes, f"exit {run.returncode} not in {list(codes)}: {run.output[-2000:]}"
    if run.returncode not in (0, 2):
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
