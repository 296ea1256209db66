"""The shipped alert rules pass `promtool check rules` and their unit tests (`promtool test rules`)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from k26ctl.watch.rules import RULES_FILE

HERE = Path(__file__).resolve().parent
PROMTOOL = shutil.which("promtool")
pytestmark = pytest.mark.skipif(
    PROMTOOL is None,
    reason="promtool is missing (Debian package prometheus; bootstrap.sh --test installs it)",
)


def _promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=120, cwd=cwd)


def test_the_rules_file_is_valid(tmp_path: Path) -> None:
    proc = _promtool("check", "rules", str(RULES_FILE), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "6 rules found" in proc.stdout


def test_the_rule_unit_tests_pass(tmp_path: Path) -> None:
    shutil.copy(RULES_FILE, tmp_path / "alerts.yml")
    shutil.copy(HERE / "alerts_test.yml", tmp_path / "alerts_test.yml")
    proc = _promtool("test", "rules", "alerts_test.yml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout + proc.stderr


def test_a_wrong_expectation_fails_the_rule_tests(tmp_path: Path) -> None:
    """The check above can fail: a test expecting the failing alert one minute early is refused."""
    shutil.copy(RULES_FILE, tmp_path / "alerts.yml")
    text = (HERE / "alerts_test.yml").read_text()
    quiet = "      - eval_time: 1m\n        alertname: K26ServerFailing\n        exp_alerts: []"
    broken = text.replace(
        quiet, quiet.replace("exp_alerts: []", "exp_alerts:\n          - exp_labels: {a: b}"), 1
    )
    assert broken != text
    (tmp_path / "alerts_test.yml").write_text(broken)
    proc = _promtool("test", "rules", "alerts_test.yml", cwd=tmp_path)
    assert proc.returncode != 0
