"""`k26ctl --version` answers without loading the smoke detectors or their word lists.

Runs a fresh `python -X importtime -m k26ctl --version`: every module the command imported is
listed on its standard error (the command may leave through os._exit, so nothing runs after it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_DETECTOR_SIDE = ("k26ctl.smoke", "wordfreq", "ftfy", "regex")


def test_version_imports_no_detector_module() -> None:
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "k26ctl", "--version"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        check=True,
    )
    assert proc.stdout.startswith("k26ctl "), proc.stdout
    imported = [line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if "|" in line]
    assert "k26ctl" in imported  # the listing is there
    assert [m for m in imported if m.startswith(_DETECTOR_SIDE)] == []
