"""Shared shapes of the search strategies: what to test next, and how a search ended.

A strategy is a pure function of the verdicts recorded so far. It never remembers anything itself, so a
resumed session only has to feed the same verdicts back to get the same next step.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from k26ctl.search.assignment import Assignment, describe
from k26ctl.search.verdict import Verdict

Lookup = Callable[[Assignment], "Verdict | None"]


@dataclass(frozen=True)
class Probe:
    """The next configuration to deploy and judge."""

    assignment: Assignment
    purpose: Literal["verify-good", "verify-bad", "search"]
    window: str  # human description of what is still undecided
    steps_left: int  # estimate including this probe

    @property
    def label(self) -> str:
        return describe(self.assignment)

    @property
    def expected(self) -> Verdict | None:
        return {"verify-good": Verdict.GOOD, "verify-bad": Verdict.BAD}.get(self.purpose)


@dataclass(frozen=True)
class EndCheckFailed:
    """A verified end did not behave as claimed: searching between them would give a wrong answer."""

    end: Literal["good", "bad"]
    assignment: Assignment
    verdict: Verdict

    def message(self) -> str:
        what = describe(self.assignment)
        return f"the {self.end} end {what} was judged {self.verdict.value}, not {self.end}"


@dataclass(frozen=True)
class NumericOutcome:
    key: str
    status: Literal["found", "inconclusive"]
    last_good: Any
    first_bad: Any
    # inconclusive: every value that may be the first bad one (skips blocked the search between them)
    suspects: list[Any] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "status": self.status,
            "last_good": self.last_good,
            "first_bad": self.first_bad,
        }
        if self.status == "inconclusive":
            doc["suspects"] = self.suspects
        return doc


@dataclass(frozen=True)
class Change:
    """One dotted key that differs between the good and the bad profile."""

    key: str
    good: Any
    bad: Any

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "good": self.good, "bad": self.bad}


@dataclass(frozen=True)
class SetOutcome:
    changes: list[Change]
    culprits: list[Change]  # a 1-minimal failure-inducing subset of `changes`
    refined: dict[str, NumericOutcome]  # numeric culprits bisected between their good and bad value


Outcome = NumericOutcome | SetOutcome
Plan = Probe | EndCheckFailed | Outcome


def binary_steps(gaps: int) -> int:
    """Probes a bisection needs, at worst, to find the boundary among `gaps` + 1 ordered candidates
    whose ends are known: each probe halves the gaps (rounding up)."""
    return math.ceil(math.log2(gaps)) if gaps > 1 else 0
