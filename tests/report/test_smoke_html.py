"""`k26ctl smoke --html` against the lab stand-in server on loopback: the page is the one `k26ctl
report` makes from the same run's --json output, it opens clean in Chromium, and neither `--version`
nor a smoke without --html imports any report code (nor matplotlib)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from k26ctl.resources import project_root
from tests.report.hostile import DATA
from tests.support import browser
from tests.support.cli import cli_env, run_k26ctl

SUITE = project_root() / "benchmarks" / "data" / "sweep-smoke-suite.yaml"

# runs the command as the console script does, then says which report modules it imported
_PROBE = """
import json, sys
from k26ctl.cli.app import main
from k26ctl.cli.lean_imports import keep_unused_imports_out
keep_unused_imports_out()
sys.argv = ["k26ctl", *sys.argv[1:]]
try:
    main()
    code = 0
except SystemExit as exc:
    code = exc.code
loaded = sorted(m for m in sys.modules if m.startswith("k26ctl.report") or m.split(".")[0] == "matplotlib")
print("REPORT-MODULES " + json.dumps({"code": code, "loaded": loaded}), file=sys.stderr)
"""


def _imports(*args: str, timeout: float = 300) -> tuple[dict, subprocess.CompletedProcess[str]]:
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, *args], capture_output=True, text=True, timeout=timeout, env=cli_env()
    )
    line = next(x for x in proc.stderr.splitlines() if x.startswith("REPORT-MODULES "))
    return json.loads(line.split(" ", 1)[1]), proc


def test_version_imports_no_report_code() -> None:
    seen, _ = _imports("--version")
    assert seen == {"code": 0, "loaded": []}


def test_the_import_check_sees_report_code_when_it_is_used(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="the report extra (matplotlib) is not installed")
    seen, proc = _imports("report", str(DATA / "bisect.json"), "--html", str(tmp_path / "p.html"))
    assert seen["code"] == 0, proc.stderr
    assert "k26ctl.report.page" in seen["loaded"] and "matplotlib" in seen["loaded"]


@pytest.mark.lab
def test_smoke_html_against_the_stand_in_is_the_report_of_its_json(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="the lab server needs torch")
    pytest.importorskip("matplotlib", reason="the report extra (matplotlib) is not installed")
    from tests.support.lab_server import lab_server

    page = tmp_path / "smoke.html"
    common = ["--suite", str(SUITE), "--min-accept-length", "2.5", "--json"]
    with lab_server("ddtree-b16") as server:
        plain, plain_proc = _imports("smoke", "--url", server.url, *common)
        drawn, drawn_proc = _imports("smoke", "--url", server.url, *common, "--html", str(page))
    # unpatched budget 16: the smoke fails (exit 1), and only the --html run loads the report code
    assert plain["code"] == 1, plain_proc.stderr[-2000:]
    assert plain["loaded"] == []
    assert drawn["code"] == 1, drawn_proc.stderr[-2000:]
    assert "k26ctl.report.smoke_view" in drawn["loaded"] and "matplotlib" in drawn["loaded"]
    saved = tmp_path / "smoke.json"
    saved.write_text(drawn_proc.stdout)
    again = tmp_path / "again.html"
    done = run_k26ctl("report", str(saved), "--html", str(again))
    assert done.returncode == 0, done.stderr
    assert again.read_text() == page.read_text()  # one path: result -> JSON -> page
    if browser.available() is not None:
        pytest.skip(browser.available() or "")
    with browser.chromium() as chromium, chromium.open(page) as loaded:
        assert len(loaded.page.query_selector_all("section.result.bad")) == 2
        assert loaded.page.query_selector_all(".strip span.wrong")
        loaded.page.screenshot(path=str(tmp_path / "smoke.png"))
    assert loaded.console_errors == []
    assert (tmp_path / "smoke.png").stat().st_size > 10_000
