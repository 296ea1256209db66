"""Pages made from real lab results (tests/report/data, saved --json output): what each must show,
hostile strings escaped, and the `report` command giving the same page as a command's --html."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from k26ctl.errors import ConfigError
from tests.report.hostile import (
    DATA,
    fixture,
    hostile_bisect_log,
    hostile_fleet,
    hostile_smoke,
    hostile_sweep,
)
from tests.support.cli import cli_env, run_k26ctl

pytest.importorskip("matplotlib", reason="the report extra (matplotlib) is not installed")

from k26ctl.report import page_html
from k26ctl.report.kind import kind_of

FIXTURES = {
    "deploy-unpatched.json": "deploy",
    "smoke-patched.json": "smoke",
    "bisect.json": "bisect",
    "bisect-log.json": "bisect-log",
    "sweep.json": "sweep",
    "sweep-log.json": "sweep",
    "fleet-halted-bad-roll.json": "fleet-roll",
    "fleet-done-good-roll.json": "fleet-roll",
}


@pytest.mark.parametrize(("name", "kind"), sorted(FIXTURES.items()))
def test_each_saved_result_is_told_apart_and_drawn(name: str, kind: str) -> None:
    doc = fixture(name)
    assert kind_of(doc) == kind
    page = page_html(doc)
    assert page.startswith("<!doctype html>") and page.rstrip().endswith("</html>")
    # self-contained: nothing is fetched, no script at all
    assert not re.search(r"<(script|link|iframe|object|embed)\b", page, re.I)
    assert not re.search(r"""\b(src|href)=["']?(https?:|//)""", page, re.I)
    assert "Content-Security-Policy" in page and "default-src 'none'" in page


def test_the_unpatched_smoke_page_marks_spans_mismatches_and_the_floor() -> None:
    doc = fixture("deploy-unpatched.json")
    page = page_html(doc)
    smoke = doc["smoke"]
    assert page.count('class="result bad"') == len([r for r in smoke["results"] if not r["passed"]])
    # every finding with a character span is marked in its text
    spans = sum(
        1
        for r in smoke["results"]
        for f in r["findings"]
        if f["span"][1] > f["span"][0] and f["detector"] != "self_consistency"
    )
    assert spans > 0 and page.count('<mark class="finding"') >= spans // 2
    # the probes' mismatches on the token strip, with the decoded tokens
    wrong = sum(len(a["mismatch_positions"]) for a in smoke["probes"]["answers"])
    assert page.count('class="wrong"') == wrong
    token = smoke["probes"]["answers"][0]["mismatch_tokens"][0]
    assert (
        f'token {token["position"]}: the answer had <code class="tok">&#34;{token["expected"]}&#34;</code>'
        in page
    )
    assert "floor 2.5" in page and "below floor" in page
    assert "SGLang release</dt><dd>0.5.15" in page
    assert "speculative_ddtree_budget" in page and "not deterministic" in page


def test_the_sweep_page_never_draws_an_incoherent_point_on_a_curve() -> None:
    doc = fixture("sweep.json")
    page = page_html(doc)
    incoherent = [p for p in doc["points"] if not p["coherent"]]
    assert incoherent and page.count('<span class="badge bad">incoherent</span>') == len(incoherent)
    assert page.count("<svg") == 3  # one chart per parameter (2) and the Pareto front
    assert "recommended spec.algorithm=DFLASH" in page
    assert f"{doc['restarts']} of {doc['max_restarts']} restarts spent" in page
    assert page.count("<tr") == len(doc["points"]) + 1


def test_the_bisect_pages_show_the_culprit_the_timeline_and_load_times() -> None:
    for name in ("bisect.json", "bisect-log.json"):
        page = page_html(fixture(name))
        assert "first bad 8, last good 7" in page
        assert page.count("<svg") == 2  # the timeline and the interval
        assert "6.2</td>" in page  # the first restart's server load time
    log_page = page_html(fixture("bisect-log.json"))
    assert "smoke PASSED: 2/2 requests ok" in log_page  # the evidence of each step


def test_the_fleet_pages_show_lanes_the_canary_the_halt_and_the_clients() -> None:
    halted = page_html(fixture("fleet-halted-bad-roll.json"))
    assert 'halted at</dt><dd><span class="badge bad">halted</span> k26pf-1' in halted
    assert "k26pf-1 (rolled first)" in halted and halted.count("not rolled (old config)") == 2
    assert halted.count("<svg") == 2  # the lanes and the clients across the roll
    assert "627 requests sent through" in halted and "627 ok, 0 failed" in halted
    good = page_html(fixture("fleet-done-good-roll.json"))
    assert "no halt" in good and "not rolled" not in good and good.count("<svg") == 2


@pytest.mark.parametrize("make", [hostile_smoke, hostile_sweep, hostile_bisect_log, hostile_fleet])
def test_hostile_strings_are_escaped_everywhere(make: Callable[[], dict[str, Any]]) -> None:
    page = page_html(make())
    assert not re.search(r"<(script|iframe|img)\b", page, re.I)
    assert "<svg onload" not in page and "</style><style>" not in page
    assert "&lt;script&gt;console.error(&#39;pwned-script&#39;)&lt;/script&gt;" in page
    assert "{{ 7*7 }}" in page  # a template in the data stays text


def test_a_document_of_no_known_kind_is_refused_with_exit_78(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        kind_of({"name": "k26lab", "address": "10.231.0.2"})
    not_result = tmp_path / "host.json"
    not_result.write_text('{"name": "k26lab"}')
    done = run_k26ctl("report", str(not_result), "--html", str(tmp_path / "x.html"))
    assert done.returncode == 78 and "not a k26ctl result" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "x.html").exists()
    broken = tmp_path / "broken.json"
    broken.write_text("[1")
    done = run_k26ctl("report", str(broken), "--html", str(tmp_path / "x.html"))
    assert done.returncode == 78 and "not JSON" in done.stderr


def test_report_writes_the_page_from_a_file_and_from_stdin(tmp_path: Path) -> None:
    source = DATA / "sweep.json"
    done = run_k26ctl("report", str(source), "--html", str(tmp_path / "a.html"))
    assert done.returncode == 0, done.stderr
    piped = run_k26ctl("report", "-", "--html", str(tmp_path / "b.html"), stdin=source.read_text())
    assert piped.returncode == 0, piped.stderr
    expected = page_html(json.loads(source.read_text()))
    assert (tmp_path / "a.html").read_text() == expected == (tmp_path / "b.html").read_text()


_WITHOUT_MATPLOTLIB = """
import sys
sys.modules["matplotlib"] = None  # as if the report extra were not installed
from k26ctl.cli.app import entry
sys.argv = ["k26ctl", *sys.argv[1:]]
entry()
"""


def _without_matplotlib(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _WITHOUT_MATPLOTLIB, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=cli_env(),
    )


def test_without_the_extra_html_names_the_package_before_any_work(tmp_path: Path) -> None:
    page = tmp_path / "page.html"
    done = _without_matplotlib("report", str(DATA / "sweep.json"), "--html", str(page))
    assert done.returncode == 78, done.stderr
    assert done.stderr.splitlines()[0] == "error: --html needs matplotlib, which is not installed"
    assert "pip install 'k26ctl[report]'" in done.stderr and not page.exists()
    # smoke refuses before it tries the server (unreachable here: 69 would mean it tried first)
    smoke = _without_matplotlib("smoke", "--url", "http://127.0.0.1:9", "--html", str(page))
    assert smoke.returncode == 78 and "pip install 'k26ctl[report]'" in smoke.stderr
    # everything else still works without it
    plain = _without_matplotlib("smoke", "--url", "http://127.0.0.1:9", "--timeout", "2")
    assert plain.returncode == 69, plain.stderr
