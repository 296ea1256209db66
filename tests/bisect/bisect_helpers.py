"""Drive a pure strategy with an oracle, as the engine would, and count the probes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from k26ctl.bisect.plan import EndCheckFailed, Plan, Probe
from k26ctl.search.assignment import Assignment, assignment_id
from k26ctl.search.verdict import Verdict


def drive(
    strategy: Any, oracle: Callable[[Assignment], Verdict], limit: int = 500
) -> tuple[Plan, list[Probe]]:
    history: dict[str, Verdict] = {}
    probes: list[Probe] = []
    for _ in range(limit):
        plan = strategy.plan(lambda a: history.get(assignment_id(a)))
        if not isinstance(plan, Probe):
            return plan, probes
        ident = assignment_id(plan.assignment)
        assert ident not in history, f"probed twice: {plan.assignment}"
        probes.append(plan)
        history[ident] = oracle(plan.assignment)
    raise AssertionError("search did not end")


def ended_with_end_check(plan: Plan) -> bool:
    return isinstance(plan, EndCheckFailed)
