"""The GPU loop's record (scripts/gpu/loop_record.py): the committed Markdown is what the committed JSON
renders to, and the figures it states are computed from the restarts, not written by hand."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

from tests.gpu_check.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "real-gpu-loop"


def _module() -> ModuleType:
    return load_script("loop_record")


def test_committed_markdown_is_the_rendering_of_the_committed_json() -> None:
    doc = json.loads(DOC.with_suffix(".json").read_text())
    assert doc["kind"] == "real-gpu-loop"
    assert _module().render(doc) == DOC.with_suffix(".md").read_text()


def test_start_times_split_the_first_cold_start_from_the_warm_ones() -> None:
    def restart(load: float, stop: float | None) -> dict[str, object]:
        phases = [{"name": "imports", "duration": 10.0}]
        if stop is not None:
            phases.insert(0, {"name": "stop", "duration": stop})
        return {"load_seconds": load, "phases": {"phases": phases}}

    times = _module().start_times(
        [restart(87.0, None), restart(45.0, 13.0), restart(38.0, 11.5), restart(50.0, 14.0)]
    )
    assert times["cold_seconds"] == 87.0
    assert times["warm_seconds"] == {"n": 3, "min": 38.0, "median": 45.0, "max": 50.0}
    assert times["stop_seconds"] == {"n": 3, "min": 11.5, "max": 14.0}
    assert _module().start_times([]) == {}


def test_the_record_shows_the_loop_the_issue_asks_for() -> None:
    doc = json.loads(DOC.with_suffix(".json").read_text())
    steps = {s["name"]: s for s in doc["steps"]}
    assert doc["complete"] and all(s["as_expected"] for s in doc["steps"])
    broken = steps["broken deploy"]["document"]
    assert broken["exit_code"] == 1 and broken["smoke"]["health_after"] == 200
    bisect = steps["bisect"]["document"]
    assert (bisect["first_bad"], bisect["last_good"]) == (9, 8) and bisect["restarts"] <= 6
    fixed = steps["fixed deploy"]["document"]
    assert fixed["exit_code"] == 0 and fixed["smoke"]["probes"]["mismatches"] == 0
    assert steps["sweep"]["document"]["best"]["assignment"]
    assert doc["start_times"]["cold_seconds"] > doc["start_times"]["warm_seconds"]["max"]
