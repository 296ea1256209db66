"""`systemd-analyze verify` of the rendered unit, here or on the host, read into findings."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from k26ctl.validate.findings import Finding


def missing_executable_line(name: str, executable: str) -> str:
    return f"{name}: Command {executable} is not executable: No such file or directory"


def interpret_verify(
    returncode: int, stderr: str, name: str, executable: str, *, tolerate_missing_executable: bool
) -> list[Finding]:
    """Turn `systemd-analyze verify` output into findings. The tool warns on misspelled keys without
    failing, so any stderr is an error; only the absent interpreter may be tolerated (it lives on the
    target host, not here)."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    findings: list[Finding] = []
    missing = missing_executable_line(name, executable)
    if tolerate_missing_executable and missing in lines:
        lines = [line for line in lines if line != missing]
        findings.append(
            Finding(
                "info",
                "unit/executable-on-host",
                f"{executable} does not exist here; systemd-analyze on the host checks it",
                "run `k26ctl validate --remote` for the full check",
            )
        )
    if lines or (returncode != 0 and not findings):
        shown = "; ".join(lines[:5]) or f"exit {returncode}"
        findings.append(
            Finding(
                "error",
                "unit/systemd-verify",
                f"systemd-analyze verify rejects the rendered unit: {shown}",
                "fix the profile value that produced this unit line",
            )
        )
    return findings


def verify_unit_locally(unit_text: str, name: str, executable: str) -> list[Finding]:
    tool = shutil.which("systemd-analyze")
    if tool is None:
        return [Finding("info", "unit/systemd-verify-skipped", "systemd-analyze is not installed here", "")]
    with tempfile.TemporaryDirectory(prefix="k26ctl-verify-") as tmp:
        path = Path(tmp) / name
        path.write_text(unit_text, encoding="utf-8")
        try:
            result = subprocess.run(
                [tool, "verify", "--man=no", str(path)],
                capture_output=True,
                text=True,
                timeout=60,
                cwd=tmp,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return [
                Finding("info", "unit/systemd-verify-skipped", f"systemd-analyze could not run: {exc}", "")
            ]
    return interpret_verify(
        result.returncode, result.stderr, name, executable, tolerate_missing_executable=True
    )
