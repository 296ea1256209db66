"""Restart phases on the pages: the deploy page's stacked bar and phase table, and one bar per restart
on the bisect and sweep pages, from the phases a real journal gave (tests/deploy/data/phases)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from k26ctl.deploy.phases import parse_phases
from k26ctl.remote.systemd import parse_journal_line
from tests.report.hostile import fixture

pytest.importorskip("matplotlib", reason="the report extra (matplotlib) is not installed")

from k26ctl.report import page_html

PHASES = Path(__file__).resolve().parents[1] / "deploy" / "data" / "phases"
CHART = 'aria-label="restart phases, one stacked bar per restart"'


def real_phases(name: str) -> dict[str, Any]:
    lines = (PHASES / name).read_text(encoding="utf-8").splitlines()
    return parse_phases([e for e in map(parse_journal_line, lines) if e is not None]).to_json()


def test_deploy_page_shows_the_restart_bar_table_and_prediction() -> None:
    doc = copy.deepcopy(fixture("deploy-unpatched.json"))
    doc["phases"] = real_phases("restart-0.5.15-cpu.jsonl")
    doc["expected_downtime"] = {"seconds": 100.0, "low": 90.0, "high": 110.0, "basis": "3 earlier restarts"}
    page = page_html(doc)
    assert "Restart phases" in page and page.count(CHART) == 1
    assert "old server stopping" in page and "tokenizer and scheduler start" in page
    assert "Init torch distributed begin." in page  # the evidence line
    assert "Expected before the restart: 100 s (seen 90-110 s, from 3 earlier restarts)" in page


def test_deploy_page_without_phases_has_no_restart_section() -> None:
    doc = copy.deepcopy(fixture("deploy-unpatched.json"))
    doc.pop("phases", None)
    assert "Restart phases" not in page_html(doc)


def test_bisect_and_sweep_pages_draw_every_steps_restart() -> None:
    bisect = copy.deepcopy(fixture("bisect.json"))
    for step, name in zip(
        bisect["steps"], ("restart-0.5.15-cpu.jsonl", "restart-0.5.23-cpu.jsonl"), strict=False
    ):
        step["phases"] = real_phases(name)
    page = page_html(bisect)
    assert page.count(CHART) == 1 and "step 1" in page
    sweep = copy.deepcopy(fixture("sweep.json"))
    sweep["points"][0]["phases"] = real_phases("restart-0.5.23-cpu.jsonl")
    assert page_html(sweep).count(CHART) == 1
    assert CHART not in page_html(fixture("sweep.json"))  # saved before phases existed: no empty chart


def test_the_legend_is_inside_the_drawn_figure() -> None:
    import re

    from k26ctl.report.restarts import restart_chart

    svg = str(restart_chart([("r", real_phases("restart-0.5.23-cpu.jsonl"))], "legend"))
    height = float(re.search(r'viewBox="0 0 [\d.]+ ([\d.]+)"', svg)[1])  # type: ignore[index]
    legend = svg[svg.index('id="legend_1"') :]
    ys = [float(y) for y in re.findall(r"L [\d.]+ ([\d.]+)", legend[:3000])]
    assert ys and min(ys) >= 0 and max(ys) <= height
    assert "old server stopping" in legend and "weight loading" in legend
