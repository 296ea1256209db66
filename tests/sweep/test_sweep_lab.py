"""`k26ctl sweep` end to end on the real lab host (nspawn + sshd + systemd) and the lab server.

A small sweep over the unpatched budget around 7 with the GPU step-time model: budget 8 breaks the
output (the verify mask is sized for 8 rows, the tree needs 9), so it must be recorded as incoherent
and never measured or recommended; the controls are measured; the session log, the JSON document
and the winner profile agree; reset restores what was live before the sweep.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest
import yaml

from k26ctl.lab.host import LabHostState
from k26ctl.resources import profiles_dir, project_root
from tests.support.cli import run_k26ctl

pytestmark = [pytest.mark.labhost, pytest.mark.lab]

PROFILE = profiles_dir() / "lab" / "sweep.yaml"
SUITE = project_root() / "benchmarks" / "data" / "sweep-smoke-suite.yaml"


@pytest.fixture
def lab_env(lab_host: LabHostState, tmp_path: Path) -> dict[str, str]:
    real = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "k26ctl" / "lab"
    state = tmp_path / "state"
    (state / "k26ctl").mkdir(parents=True)
    (state / "k26ctl" / "lab").symlink_to(real)
    return {"XDG_STATE_HOME": str(state)}


def test_small_sweep_on_the_lab_host(lab_host: LabHostState, lab_env: dict[str, str], tmp_path: Path) -> None:
    sets = ["--set", f"host.lab={lab_host.name}", "--set", f"smoke.suite={SUITE}"]
    # what is live before the sweep: plain decoding
    first = run_k26ctl(
        "deploy",
        str(profiles_dir() / "lab" / "none.yaml"),
        *sets[:2],
        "--yes",
        "--no-smoke",
        env=lab_env,
        timeout=900,
    )
    assert first.returncode == 0, first.stderr
    winner_file = tmp_path / "winner.yaml"
    run = run_k26ctl(
        "sweep", str(PROFILE), *sets,
        "--param", "spec.ddtree.budget=6..8",
        "--concurrency", "1,2", "--requests", "4", "--max-tokens", "32", "--max-restarts", "6",
        "--write-profile", str(winner_file), "--yes", "--json",
        env=lab_env,
        timeout=900,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    doc = json.loads(run.stdout)
    points = {json.dumps(p["assignment"], sort_keys=True): p for p in doc["points"]}
    broken = points[json.dumps({"spec.ddtree.budget": 8})]
    assert broken["coherent"] is False and broken["levels"] == []
    roles = [p["role"] for p in doc["points"]]
    assert roles.count("control") == 2 and "default" in roles
    for point in doc["points"]:
        if point["coherent"]:
            assert {lv["concurrency"] for lv in point["levels"]} == {1, 2}
            assert point["output_tokens_per_s"] > 0
    # the DDTree points report accept length from meta_info; speculation off has none
    default = next(p for p in doc["points"] if p["role"] == "default")
    assert default["accept_length"] > 1.5
    assert doc["best"]["coherent"] is True
    assert doc["best"]["assignment"] != {"spec.ddtree.budget": 8}
    assert 0 < doc["restarts"] <= 6
    winner = yaml.safe_load(winner_file.read_text())
    assert winner["extends"] and Path(winner_file.parent, winner["extends"]).resolve() == PROFILE.resolve()
    rendered = run_k26ctl("render", str(winner_file), "--format", "argv", env=lab_env, timeout=900)
    assert rendered.returncode == 0, rendered.stderr
    # the log reads the same session back without deploying anything
    html = ["--html", str(tmp_path / "log.html")] if importlib.util.find_spec("matplotlib") else []
    log = run_k26ctl("sweep", "log", "--json", *html, env=lab_env, timeout=900)
    assert log.returncode == 0, log.stderr
    if html:  # the log's page is the page of the document it prints
        from k26ctl.report import page_html

        assert (tmp_path / "log.html").read_text() == page_html(json.loads(log.stdout))
    assert [p["assignment"] for p in json.loads(log.stdout)["points"]] == [
        p["assignment"] for p in doc["points"]
    ]
    # a resumed finished sweep pays nothing more
    again = run_k26ctl("sweep", "--resume", "--yes", "--json", env=lab_env, timeout=900)
    assert again.returncode == 0, again.stderr
    assert len(json.loads(again.stdout)["points"]) == len(doc["points"])
    # reset puts plain decoding back
    reset = run_k26ctl("sweep", "reset", "--yes", "--json", env=lab_env, timeout=900)
    assert reset.returncode == 0, reset.stderr
    assert json.loads(reset.stdout)["restored"] is True
    # the unit and patches are plain decoding's again: deploying none.yaml has nothing to change
    check = run_k26ctl(
        "deploy", str(profiles_dir() / "lab" / "none.yaml"), *sets[:2], "--check", env=lab_env, timeout=900
    )
    assert check.returncode == 0, check.stdout + check.stderr
