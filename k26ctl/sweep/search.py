"""Which point to pay for next: controls, the default, then coordinate passes of a line search.

A pure function of the results recorded so far (like bisect's strategies): replaying the search
through the recorded results finds the first point not yet measured, which is the next one to deploy.
A resumed sweep therefore continues exactly where it stopped, and a point is never paid twice,
because every look-up goes through the canonical assignment.

Per parameter (the others held at the best point so far) the search is a discrete golden-section
search over the values in the order given, using two facts about speculative settings:
- throughput is unimodal along a knob such as the budget (accept length rises with diminishing
  returns while verify cost grows linearly), so comparing two interior points drops a third or more
  of the range each time;
- the coherent values form one contiguous range along a knob (bisect-config assumes one change;
  the unpatched lab breaks on both sides of budget 7): an incoherent point with a coherent one on
  its other side condemns everything beyond it, without deploying it.
Known structure breaks unimodality along the DDTree budget: at budget = block size - 1 the tree is
the full draft chain, and one node more turns it into a width-2 tree whose first extra branch adds
verify rows but little acceptance, so throughput dips right after the chain length (on the lab and on
GPUs). A key can therefore carry a break point (`breaks`): the values above it are searched on their
own by golden section, the values at or below it (the chain side, usually a handful) from its top
end only: the top of the chain is measured, and lower values only while one beats the best along the
line by more than the noise tolerance. When two golden-section probes differ by less than the noise
tolerance the comparison is not trusted: the bracket of larger values is kept (accept length grows
with the budget; the smaller probe itself stays measured and eligible).
The passes repeat (at most `rounds` times) until a whole round leaves the best point unchanged, or the
restart budget is spent; the answer is always the best coherent point measured.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from k26ctl.search.assignment import Assignment
from k26ctl.sweep.space import Param, point_id

GOLDEN = (3 - math.sqrt(5)) / 2  # 0.382
# Relative throughput difference treated as measurement noise: four measurements of one configuration
# on the lab (benchmarks/README.md, step-time model at 2.5 x) spread over 2.6 % (26.8 .. 27.5 tok/s).
NEAR_TIE = 0.03


@dataclass(frozen=True)
class Evaluation:
    """What a measured point tells the search."""

    coherent: bool  # came up and passed smoke
    score: float | None  # objective value (None: incoherent, failed, or no measurement)
    feasible: bool = True  # within the latency limits


Lookup = Callable[[Assignment], "Evaluation | None"]


@dataclass(frozen=True)
class NextPoint:
    assignment: Assignment
    role: str  # "control" | "default" | "search"
    why: str


@dataclass(frozen=True)
class Finished:
    status: str  # "converged" | "budget" (the restart budget ran out first)
    best: Assignment | None


class _Need(Exception):
    def __init__(self, point: NextPoint) -> None:
        super().__init__(point.why)
        self.point = point


@dataclass(frozen=True)
class Control:
    label: str
    assignment: Assignment


@dataclass
class SweepPlanner:
    params: Sequence[Param]
    start: Assignment  # the base profile's own values of the params (the default configuration)
    controls: Sequence[Control] = ()
    rounds: int = 2
    # key -> value: values <= it and values > it are searched as separate segments (see above)
    breaks: Mapping[str, Any] = field(default_factory=dict)
    # relative difference below which two probes are a tie (0: trust every comparison)
    tie_tolerance: float = NEAR_TIE
    _lookup: Lookup | None = field(default=None, repr=False)

    def _value(self, assignment: Assignment, role: str, why: str) -> Evaluation:
        assert self._lookup is not None
        found = self._lookup(assignment)
        if found is None:
            raise _Need(NextPoint(dict(assignment), role, why))
        return found

    def plan(self, lookup: Lookup, can_pay: bool = True) -> NextPoint | Finished:
        """The next point to measure, or the end. `can_pay` False: the restart budget is spent."""
        self._lookup = lookup
        try:
            best = self._run()
            return Finished("converged", best)
        except _Need as need:
            if not can_pay:
                return Finished("budget", self.best_known(lookup))
            return need.point
        finally:
            self._lookup = None

    # ---- the search ---------------------------------------------------------------------------

    def _run(self) -> Assignment | None:
        for control in self.controls:
            self._value(control.assignment, "control", f"control: {control.label}")
        current = dict(self.start)
        self._value(current, "default", "the default configuration")
        for round_number in range(self.rounds):
            before = point_id(current)
            for param in self.params:
                if len(param.values) > 1:
                    current = self._line(param, current, round_number)
            if point_id(current) == before:
                break
        assert self._lookup is not None
        return self.best_known(self._lookup)

    def _line(self, param: Param, current: Assignment, round_number: int) -> Assignment:
        n = len(param.values)
        seen: dict[int, Evaluation] = {}

        def at(index: int) -> Evaluation:
            if index not in seen:
                implied = _implied_incoherent(seen, index)
                if implied is not None:
                    return implied  # beyond an incoherent point, seen from a coherent one: not paid
                point = {**current, param.key: param.values[index]}
                why = f"round {round_number + 1}, {param.key}={param.values[index]!r}"
                seen[index] = self._value(point, "search", why)
            return seen[index]

        start_index = param.index_of(current.get(param.key))
        if start_index is not None:
            at(start_index)
        split = _split_index(param, self.breaks.get(param.key))
        if split is None:
            self._golden(at, seen, 0, n - 1)
        else:
            self._golden(at, seen, split + 1, n - 1)  # the tree side
            self._descend(at, seen, split)  # the chain side, from its top
        candidates = [i for i, e in seen.items() if e.coherent and e.score is not None]
        if not candidates:
            return current
        best = max(candidates, key=lambda i: _rank(seen[i]))
        if start_index is not None and best == start_index:
            # On a near tie the search moves anyway: the other value may open up better points along
            # the other keys (a patch that makes larger budgets coherent), while the answer remains
            # the best point measured.
            ties = [
                i
                for i in candidates
                if i != start_index and _near(seen[i], seen[start_index], self.tie_tolerance)
            ]
            if not ties:
                return current
            best = max(ties, key=lambda i: _rank(seen[i]))
        return {**current, param.key: param.values[best]}

    def _golden(
        self, at: Callable[[int], Evaluation], seen: Mapping[int, Evaluation], lo: int, hi: int
    ) -> None:
        """Discrete golden-section search over indices lo..hi (every index of the last bracket paid)."""
        while hi - lo > 2:
            a = lo + round(GOLDEN * (hi - lo))
            b = hi - round(GOLDEN * (hi - lo))
            if b <= a:
                b = a + 1
            fa, fb = at(a), at(b)
            if not fa.coherent and not fb.coherent:
                coherent = [i for i, e in seen.items() if e.coherent]
                if any(i > b for i in coherent) and not any(i < a for i in coherent):
                    lo = b + 1  # the coherent range lies above b
                else:
                    hi = a - 1  # it lies below a (the usual case: large budgets break)
            elif not fa.coherent:
                lo = a + 1
            elif not fb.coherent:
                hi = b - 1
            elif _near(fa, fb, self.tie_tolerance):
                lo = a + 1  # a tie within noise: keep the larger values (a stays measured)
            elif _rank(fa) >= _rank(fb):
                hi = b - 1
            else:
                lo = a + 1
        for index in range(lo, hi + 1):
            at(index)

    def _descend(self, at: Callable[[int], Evaluation], seen: Mapping[int, Evaluation], top: int) -> None:
        """The chain side: its top, then lower values only while one beats every point along the line
        by more than the noise tolerance."""
        index = top
        current = at(index)
        while index > 0 and current.coherent and current.score is not None:
            best = max((e for e in seen.values() if e.coherent and e.score is not None), key=_rank)
            if best is not current:
                return  # the line's best lies elsewhere (usually the tree side)
            lower = at(index - 1)
            if not lower.coherent or lower.score is None:
                return
            if _rank(lower) <= _rank(current) or _near(lower, current, self.tie_tolerance):
                return
            index, current = index - 1, lower

    def best_known(self, lookup: Lookup) -> Assignment | None:
        """The best coherent, feasible point among every point this planner would ever look at."""
        points = [c.assignment for c in self.controls] + [dict(self.start)]
        from k26ctl.sweep.space import grid

        points += [{**self.start, **p} for p in grid(self.params)] if _small(self.params) else []
        return best_of(points, lookup)


def _near(a: Evaluation, b: Evaluation, tolerance: float = NEAR_TIE) -> bool:
    if a.score is None or b.score is None or a.feasible != b.feasible or b.score <= 0:
        return False
    return abs(a.score - b.score) < tolerance * b.score


def _split_index(param: Param, limit: Any) -> int | None:
    """The last index whose value is <= limit, when values on both sides of it exist (and the values
    ascend, as a budget range does); otherwise None (no break)."""
    if limit is None:
        return None
    try:
        ascending = all(x < y for x, y in zip(param.values, param.values[1:], strict=False))
        below = [i for i, v in enumerate(param.values) if v <= limit]
    except TypeError:
        return None
    if not ascending or not below or len(below) == len(param.values):
        return None
    return below[-1]


def _implied_incoherent(seen: Mapping[int, Evaluation], index: int) -> Evaluation | None:
    """Coherent values form one contiguous range along a key: a point past an incoherent one, seen
    from a coherent one, is incoherent too."""
    for k, e in seen.items():
        if e.coherent:
            continue
        for c, other in seen.items():
            if other.coherent and (c < k < index or index < k < c):
                return Evaluation(False, None)
    return None


def _small(params: Sequence[Param]) -> bool:
    return math.prod(len(p.values) for p in params) <= 100_000


def _rank(evaluation: Evaluation) -> tuple[int, float]:
    score = evaluation.score if evaluation.score is not None else -math.inf
    return (1 if evaluation.feasible else 0, score)


def best_of(points: Sequence[Mapping[str, Any]], lookup: Lookup) -> Assignment | None:
    best: tuple[tuple[int, float], Assignment] | None = None
    seen: set[str] = set()
    for point in points:
        ident = point_id(point)
        if ident in seen:
            continue
        seen.add(ident)
        evaluation = lookup(dict(point))
        if evaluation is None or not evaluation.coherent or evaluation.score is None:
            continue
        if not evaluation.feasible:
            continue
        rank = _rank(evaluation)
        if best is None or rank > best[0]:
            best = (rank, dict(point))
    return best[1] if best else None
