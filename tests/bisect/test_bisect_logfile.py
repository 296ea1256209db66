"""The replayable log: commands that reproduce each verdict, and markers that read back."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from k26ctl.bisect.logfile import parse_log, render_log
from k26ctl.bisect.session import SessionSpec, StepRecord
from k26ctl.errors import ConfigError
from k26ctl.search.verdict import Verdict


def step(n: int, assignment: dict, verdict: Verdict) -> StepRecord:
    return StepRecord(n, assignment, verdict, 4.5, True, [verdict.value], "")


def test_numeric_log_reproduces_each_step_with_deploy_and_smoke(tmp_path: Path) -> None:
    spec = SessionSpec(
        mode="numeric",
        profile="/p/ddtree-b16.yaml",
        param="spec.ddtree.budget",
        candidates=list(range(7, 17)),
        sets=["host.lab=t 1"],
        original={"unit_text": "secret unit text"},
    )
    steps = [
        step(1, {"spec.ddtree.budget": 7}, Verdict.GOOD),
        step(2, {"spec.ddtree.budget": 16}, Verdict.BAD),
    ]
    text = render_log("s", spec, steps, {"status": "found", "first_bad": 8, "last_good": 7})
    commands = [line for line in text.splitlines() if line.startswith("k26ctl ")]
    assert len(commands) == 2
    deploy, smoke = commands[0].split("  # k26-bisect-step ")[0].split(" && ")
    assert shlex.split(deploy) == [
        "k26ctl", "deploy", "/p/ddtree-b16.yaml", "--set", "host.lab=t 1",
        "--set", "spec.ddtree.budget=7", "--yes", "--no-smoke",
    ]  # fmt: skip
    assert shlex.split(smoke)[:3] == ["k26ctl", "smoke", "/p/ddtree-b16.yaml"]
    assert "secret unit text" not in text  # what was live stays in the session, not in a shared log
    assert '# result: {"status": "found", "first_bad": 8, "last_good": 7}' in text

    path = tmp_path / "log"
    path.write_text(text.replace('"verdict": "bad"', '"verdict": "skip"'))
    parsed = parse_log(path)
    assert parsed.spec.candidates == list(range(7, 17)) and parsed.spec.original is None
    assert [(s.assignment, s.verdict) for s in parsed.steps] == [
        ({"spec.ddtree.budget": 7}, Verdict.GOOD),
        ({"spec.ddtree.budget": 16}, Verdict.SKIP),
    ]


def test_run_log_reproduces_the_command_with_its_environment() -> None:
    spec = SessionSpec(mode="numeric", profile="p.yaml", param="k", candidates=[1, 2], run="./check.sh 'x y'")
    text = render_log("s", spec, [step(1, {"k": 1}, Verdict.GOOD)], None)
    line = next(x for x in text.splitlines() if x.startswith("k26ctl deploy"))
    judge = line.split(" && ", 1)[1].split("  # k26-bisect-step")[0]
    words = shlex.split(judge)
    assert words[0] == "env" and "K26_BISECT_VALUE=1" in words and words[-2:] == ["-c", "./check.sh 'x y'"]
    assert "--resume" in text.splitlines()[-1]


def test_set_mode_log_sets_every_changed_key() -> None:
    spec = SessionSpec(mode="set", good_profile="g.yaml", bad_profile="b.yaml")
    assignment = {"sglang.served_model_name": "renamed", "spec.ddtree.budget": 16}
    text = render_log("s", spec, [step(1, assignment, Verdict.BAD)], None)
    line = next(x for x in text.splitlines() if x.startswith("k26ctl deploy"))
    words = shlex.split(line.split(" && ")[0])
    assert (
        words[2] == "g.yaml"
        and "sglang.served_model_name=renamed" in words
        and "spec.ddtree.budget=16" in words
    )


def test_a_file_without_the_spec_marker_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_text("k26ctl deploy x --yes\n")
    with pytest.raises(ConfigError):  # a damaged input file: exit 78
        parse_log(path)
    path.write_text(
        '# k26-bisect-spec {"mode": "numeric"}\nx  # k26-bisect-step {"assignment": {}, "verdict": "meh"}\n'
    )
    with pytest.raises(ConfigError):
        parse_log(path)
