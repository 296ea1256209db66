"""A crash of k26ctl is never a verdict: exit 70 (EX_SOFTWARE), one line, the traceback in a file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.cli import ROOT, cli_env

# Replace a function the smoke command calls before it connects anywhere, then run the real CLI.
_FORCE = """
import sys
import k26ctl.smoke.suite as suite
def broken(*args, **kwargs):
    {body}
suite.load_suite = broken
from k26ctl.cli.app import entry
sys.argv = ["k26ctl", "smoke", "--url", "http://127.0.0.1:9", "--suite", "lab"]
entry()
"""


def _crash(tmp_path: Path, body: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _FORCE.format(body=body)],
        capture_output=True,
        text=True,
        timeout=120,
        env=cli_env({"XDG_STATE_HOME": str(tmp_path / "state")}),
        cwd=ROOT,
    )


def test_an_unexpected_exception_exits_70_with_one_line_and_the_traceback_in_a_file(tmp_path: Path) -> None:
    done = _crash(tmp_path, "raise RuntimeError('forced internal error')")
    assert done.returncode == 70, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr
    line = lines[0]
    assert line.startswith("error: internal error: RuntimeError: forced internal error at ")
    assert "not a verdict" in line
    crashes = list((tmp_path / "state" / "k26ctl" / "crashes").glob("crash-*.txt"))
    assert len(crashes) == 1 and str(crashes[0]) in line
    written = crashes[0].read_text()
    assert "Traceback (most recent call last)" in written and "forced internal error" in written


def test_a_missing_module_names_the_package_and_the_install_command(tmp_path: Path) -> None:
    # as on a machine without the detectors' word lists: `import wordfreq` fails
    done = _crash(tmp_path, "sys.modules['wordfreq'] = None; import wordfreq")
    assert done.returncode == 70, done.stderr
    line = done.stderr.strip()
    assert "the Python module 'wordfreq' is missing" in line
    assert "python3 -m pip install wordfreq" in line
    assert "\n" not in line


def test_import_names_map_to_their_packages() -> None:
    from k26ctl.cli.crash import describe

    try:
        raise ModuleNotFoundError("No module named 'yaml'", name="yaml")
    except ModuleNotFoundError as exc:
        assert "python3 -m pip install PyYAML" in describe(exc)
