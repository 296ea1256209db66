"""Persistence: a crash after any record (or in the middle of writing one) resumes to the same answer
without redoing a finished step."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from k26ctl.bisect.ddmin import SetSearch
from k26ctl.bisect.engine import StepOutcome, Strategy, run_search
from k26ctl.bisect.numeric import NumericSearch
from k26ctl.bisect.plan import Change, Probe
from k26ctl.bisect.session import Session, SessionSpec
from k26ctl.search.assignment import Assignment, assignment_id
from k26ctl.search.verdict import Verdict

KEY = "spec.ddtree.budget"

# a session spec, the strategy that searches it, and the oracle that answers each probe
Case = tuple[SessionSpec, Strategy, Callable[[Assignment], Verdict]]


class OracleRunner:
    def __init__(self, oracle: Callable[[Assignment], Verdict]) -> None:
        self.oracle = oracle
        self.calls: list[str] = []

    def run(self, probe: Probe, step: int) -> StepOutcome:
        self.calls.append(assignment_id(probe.assignment))
        verdict = self.oracle(probe.assignment)
        return StepOutcome(verdict, restarted=True, tries=[verdict], detail="oracle")


def numeric_case() -> Case:
    def oracle(a: Assignment) -> Verdict:
        if a[KEY] == 12:
            return Verdict.SKIP
        return Verdict.BAD if a[KEY] >= 10 else Verdict.GOOD

    spec = SessionSpec(
        mode="numeric", profile="p.yaml", param=KEY, candidates=list(range(7, 17)), deploy=False
    )
    return spec, NumericSearch(KEY, list(range(7, 17))), oracle


def set_case() -> Case:
    changes = [
        Change("sglang.context_length", 131072, 4096),
        Change("sglang.served_model_name", "a", "b"),
        Change("sglang.log_level", None, "debug"),
        Change(KEY, 7, 16),
    ]
    spec = SessionSpec(mode="set", good_profile="g.yaml", bad_profile="b.yaml", deploy=False)
    oracle = lambda a: Verdict.BAD if a.get(KEY, 7) >= 8 else Verdict.GOOD  # noqa: E731
    return spec, SetSearch(changes), oracle


@pytest.mark.parametrize("case", [numeric_case, set_case])
def test_crash_after_every_record_resumes_to_the_same_answer(
    tmp_path: Path, case: Callable[[], Case]
) -> None:
    spec, strategy, oracle = case()
    reference = Session("ref", tmp_path / "ref")
    reference.create(spec)
    full_runner = OracleRunner(oracle)
    expected = run_search(reference, strategy, full_runner).to_json()
    lines = reference.log_path.read_text().splitlines(keepends=True)
    assert len(lines) == 2 * len(full_runner.calls)  # one start and one finish per step

    cut_points = [(k, "") for k in range(len(lines) + 1)]
    cut_points += [(k, lines[k][: len(lines[k]) // 2]) for k in range(len(lines))]  # torn writes
    for keep, torn in cut_points:
        session = Session(f"crash-{keep}-{bool(torn)}", tmp_path / "crashes")
        session.create(spec)
        session.log_path.write_text("".join(lines[:keep]) + torn)
        finished_before = {assignment_id(s.assignment) for s in session.finished_steps()}
        runner = OracleRunner(oracle)
        result = run_search(session, strategy, runner)
        got = result.to_json()
        assert (got.get("first_bad"), got.get("last_good"), got.get("culprit_keys")) == (
            expected.get("first_bad"),
            expected.get("last_good"),
            expected.get("culprit_keys"),
        )
        assert not finished_before & set(runner.calls), "a finished step was run again"
        assert len(finished_before) + len(runner.calls) == len(full_runner.calls)
        finishes = [json.loads(x) for x in session.log_path.read_text().splitlines() if '"finish"' in x]
        ids = [assignment_id(r["assignment"]) for r in finishes]
        assert len(ids) == len(set(ids)), "a configuration has two finish records"


def test_an_interrupted_step_is_reported_and_redone(tmp_path: Path) -> None:
    spec, strategy, oracle = numeric_case()
    session = Session("s", tmp_path)
    session.create(spec)
    session.record_start(1, {KEY: 7}, "verify-good")
    assert session.interrupted_step() is not None
    runner = OracleRunner(oracle)
    result = run_search(session, strategy, runner)
    assert runner.calls[0] == assignment_id({KEY: 7})
    assert result.to_json()["first_bad"] == 10
    assert session.interrupted_step() is None
    outcome = session.outcome()
    assert outcome is not None and outcome["first_bad"] == 10


def test_a_finished_session_resumes_without_running_anything(tmp_path: Path) -> None:
    spec, strategy, oracle = numeric_case()
    session = Session("s", tmp_path)
    session.create(spec)
    first = run_search(session, strategy, OracleRunner(oracle))
    again = OracleRunner(oracle)
    second = run_search(session, strategy, again)
    assert again.calls == [] and second.to_json()["steps"] == first.to_json()["steps"]


def test_a_corrupt_line_in_the_middle_is_an_error_not_a_silent_restart(tmp_path: Path) -> None:
    from k26ctl.errors import K26Error

    spec, strategy, oracle = numeric_case()
    session = Session("s", tmp_path)
    session.create(spec)
    run_search(session, strategy, OracleRunner(oracle))
    lines = session.log_path.read_text().splitlines(keepends=True)
    lines[1] = "{not json\n"
    session.log_path.write_text("".join(lines))
    with pytest.raises(K26Error):
        session.finished_steps()


def test_one_process_per_session(tmp_path: Path) -> None:
    from k26ctl.search.session import SessionLocked

    session = Session("s", tmp_path)
    with session.locked(), pytest.raises(SessionLocked), Session("s", tmp_path).locked():
        pass


def test_state_lives_under_xdg_state_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    session = Session("mine")
    assert session.spec_path == tmp_path / "k26ctl" / "bisect" / "mine.json"
    assert session.log_path.name == "mine.log.jsonl"
