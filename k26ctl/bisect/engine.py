"""The search loop: ask the strategy for a probe, record its start, run it, record its verdict.

All state lives in the session files, so the loop can stop anywhere (Ctrl-C, lost SSH, SIGKILL) and a
later run picks up from the records: finished probes feed the strategy, an unfinished one is redone.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from k26ctl.bisect.ddmin import SetSearch
from k26ctl.bisect.numeric import NumericSearch, max_probes
from k26ctl.bisect.plan import EndCheckFailed, NumericOutcome, Outcome, Plan, Probe, SetOutcome
from k26ctl.bisect.session import Session, StepRecord
from k26ctl.documents import tagged
from k26ctl.errors import K26Error
from k26ctl.search.assignment import assignment_id
from k26ctl.search.verdict import Verdict


class EndCheckError(K26Error):
    """A verified end did not behave as claimed; the answer between them would be meaningless."""

    exit_code = 1


@dataclass
class StepOutcome:
    verdict: Verdict
    restarted: bool = False
    tries: list[Verdict] = field(default_factory=list)
    detail: str = ""
    load_seconds: float | None = None  # the restart's server load time, when the deploy read it
    phases: dict[str, Any] | None = None  # the restart's phases (deploy.phases.RestartPhases JSON)


class StepRunner(Protocol):
    def run(self, probe: Probe, step: int) -> StepOutcome: ...


class Strategy(Protocol):
    def plan(self, lookup: Any) -> Plan: ...


class Reporter(Protocol):
    def resumed(self, finished: int, redo: dict[str, Any] | None) -> None: ...

    def started(self, step: int, probe: Probe, eta_seconds: float | None) -> None: ...

    def finished(self, step: int, record: StepRecord) -> None: ...


class SilentReporter:
    def resumed(self, finished: int, redo: dict[str, Any] | None) -> None:
        pass

    def started(self, step: int, probe: Probe, eta_seconds: float | None) -> None:
        pass

    def finished(self, step: int, record: StepRecord) -> None:
        pass


@dataclass
class SearchResult:
    session: str
    outcome: Outcome
    steps: list[StepRecord]
    candidates: int  # numeric: number of values; set: number of changed keys
    bound: int | None  # numeric: the promised maximum of restarts (ends + ceil(log2 n))

    @property
    def restarts(self) -> int:
        return sum(1 for step in self.steps if step.restarted)

    @property
    def found(self) -> bool:
        if isinstance(self.outcome, NumericOutcome):
            return self.outcome.status == "found"
        return all(r.status == "found" for r in self.outcome.refined.values())

    def to_json(self) -> dict[str, Any]:
        steps = [
            {
                "value": _step_value(self.outcome, step),
                "verdict": step.verdict.value,
                "seconds": round(step.seconds, 2),
                "restarted": step.restarted,
                **({"load_seconds": round(step.load_seconds, 2)} if step.load_seconds is not None else {}),
                **({"phases": step.phases} if step.phases else {}),
                **({"tries": step.tries} if len(step.tries) > 1 else {}),
                **({"replayed": True} if step.replayed else {}),
            }
            for step in self.steps
        ]
        doc: dict[str, Any] = {"session": self.session}
        if isinstance(self.outcome, NumericOutcome):
            doc.update(mode="numeric", key=self.outcome.key, **self.outcome.to_json())
            doc.update(candidates=self.candidates, max_restarts=self.bound, linear_restarts=self.candidates)
        else:
            doc.update(_set_json(self.outcome))
        doc.update(steps=steps, restarts=self.restarts, seconds=round(sum(s.seconds for s in self.steps), 2))
        return tagged("bisect", doc)


def _step_value(outcome: Outcome, step: StepRecord) -> Any:
    if isinstance(outcome, NumericOutcome) and set(step.assignment) == {outcome.key}:
        return step.assignment[outcome.key]
    return step.assignment


def _set_json(outcome: SetOutcome) -> dict[str, Any]:
    culprits = []
    for change in outcome.culprits:
        entry = change.to_json()
        refined = outcome.refined.get(change.key)
        if refined is not None:
            entry.update(refined.to_json())
        culprits.append(entry)
    doc: dict[str, Any] = {
        "mode": "set",
        "status": "found" if all(r.status == "found" for r in outcome.refined.values()) else "inconclusive",
        "culprit_keys": [c.key for c in outcome.culprits],
        "culprits": culprits,
        "changed_keys": [c.key for c in outcome.changes],
        "candidates": len(outcome.changes),
    }
    if len(culprits) == 1 and "first_bad" in culprits[0]:
        doc.update(first_bad=culprits[0]["first_bad"], last_good=culprits[0]["last_good"])
    return doc


def _end_error(failed: EndCheckFailed) -> EndCheckError:
    if failed.verdict is Verdict.SKIP:
        hint = "the service did not come up (or the judge skipped) at that end: fix it, or choose another end"
    elif failed.end == "good":
        hint = "the claimed good value already fails: pick an older/smaller good value"
    else:
        hint = "the claimed bad value passes: check --bad, or the check (smoke or --run) misses the failure"
    hint += "; 'k26ctl bisect-config reset' puts back the deployment from before the search"
    return EndCheckError(f"end check failed: {failed.message()}; stopping the search", hint)


def search_bound(strategy: Strategy) -> tuple[int, int | None]:
    if isinstance(strategy, NumericSearch):
        n = len(strategy.candidates)
        return n, max_probes(n, verify_ends=strategy.verify_ends)
    if isinstance(strategy, SetSearch):
        return len(strategy.changes), None
    return 0, None


def run_search(
    session: Session,
    strategy: Strategy,
    runner: StepRunner,
    reporter: Reporter | None = None,
    *,
    outcome_saver: bool = True,
) -> SearchResult:
    reporter = reporter or SilentReporter()
    steps: list[StepRecord] = session.finished_steps()
    verdicts = {assignment_id(s.assignment): s.verdict for s in steps}
    if steps or session.interrupted_step():
        reporter.resumed(len(steps), session.interrupted_step())
    candidates, bound = search_bound(strategy)

    while True:
        plan = strategy.plan(lambda a: verdicts.get(assignment_id(a)))
        if isinstance(plan, EndCheckFailed):
            raise _end_error(plan)
        if not isinstance(plan, Probe):
            result = SearchResult(session.name, plan, steps, candidates, bound)
            if outcome_saver:
                session.save_outcome(result.to_json())
            return result
        number = max((s.step for s in steps), default=0) + 1
        session.record_start(number, plan.assignment, plan.purpose)
        reporter.started(number, plan, _eta(steps, plan.steps_left))
        began = time.monotonic()
        outcome = runner.run(plan, number)
        record = StepRecord(
            step=number,
            assignment=plan.assignment,
            verdict=outcome.verdict,
            seconds=time.monotonic() - began,
            restarted=outcome.restarted,
            tries=[v.value for v in outcome.tries],
            detail=outcome.detail,
            load_seconds=outcome.load_seconds,
            phases=outcome.phases,
        )
        session.record_finish(record)
        steps.append(record)
        verdicts[assignment_id(plan.assignment)] = record.verdict
        reporter.finished(number, record)


def _eta(steps: Sequence[StepRecord], left: int) -> float | None:
    """Seconds the remaining steps may take, from the steps that restarted the service: each new value
    restarts it, and a step that did not (an end the host already ran) says nothing of their length."""
    measured = [s for s in steps if not s.replayed]
    restarted = [s.seconds for s in measured if s.restarted]
    if restarted:
        return left * sum(restarted) / len(restarted)
    if len(measured) < 2:  # one quick step without a restart: no estimate rather than a wrong one
        return None
    return left * sum(s.seconds for s in measured) / len(measured)
