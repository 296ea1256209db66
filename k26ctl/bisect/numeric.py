"""Binary search for the first bad value of one key over ordered candidates (git bisect on a line).

Candidates run from the claimed good end (index 0) to the claimed bad end (index n-1). The search keeps
the window (highest good index, lowest bad index) and probes its middle. A skipped probe is replaced by
its nearest untested neighbour (mid+1, mid-1, mid+2, ...); when only skipped values remain inside the
window, the search stops with the range of suspects, as git bisect does.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from k26ctl.bisect.plan import EndCheckFailed, Lookup, NumericOutcome, Plan, Probe, binary_steps
from k26ctl.search.assignment import Assignment
from k26ctl.search.verdict import Verdict


def max_probes(n_candidates: int, *, verify_ends: bool = True) -> int:
    """The promised bound without skips: both ends (if verified) + ceil(log2(n))."""
    return (2 if verify_ends else 0) + binary_steps(n_candidates)


@dataclass(frozen=True)
class _End:
    verdict: Verdict | None
    index: int
    purpose: Literal["verify-good", "verify-bad"]
    end: Literal["good", "bad"]
    expected: Verdict


@dataclass(frozen=True)
class NumericSearch:
    key: str
    candidates: Sequence[Any]
    verify_ends: bool = True
    base: Assignment = field(default_factory=dict)  # other keys held fixed (set mode refinement)
    neutral: Any = None  # a value equal to the base profile's own value (dropped from assignments)
    has_neutral: bool = False
    # Judge the bad end first: it is what the host runs now, so its step needs no restart.
    bad_end_first: bool = False

    def __post_init__(self) -> None:
        if len(self.candidates) < 2:
            raise ValueError("a search needs at least two candidates (the good and the bad end)")
        ids = [json.dumps(c, sort_keys=True, default=str) for c in self.candidates]
        if len(set(ids)) != len(ids):
            raise ValueError("candidates must be distinct")

    def assignment(self, index: int) -> Assignment:
        value = self.candidates[index]
        chosen = dict(self.base)
        if self.has_neutral and value == self.neutral:
            chosen.pop(self.key, None)
        else:
            chosen[self.key] = value
        return chosen

    def _window(self, lo: int, hi: int) -> str:
        between = hi - lo - 1
        return (
            f"{self.key}: last good {self.candidates[lo]!r}, first bad {self.candidates[hi]!r}"
            f" ({between} untested between)"
            if between
            else f"{self.key}: last good {self.candidates[lo]!r}, first bad {self.candidates[hi]!r}"
        )

    def plan(self, lookup: Lookup) -> Plan:
        """Replays the search through the recorded verdicts; the first unjudged probe is the next one.

        Only the probes this search itself would make are looked up, so a plan costs O(log n) lookups.
        """
        n = len(self.candidates)

        def seen(index: int) -> Verdict | None:
            return lookup(self.assignment(index))

        if self.verify_ends:
            good_end, bad_end = seen(0), seen(n - 1)
            estimate = (good_end is None) + (bad_end is None) + binary_steps(n - 1)
            window = self._window(0, n - 1)
            ends: list[_End] = [
                _End(good_end, 0, "verify-good", "good", Verdict.GOOD),
                _End(bad_end, n - 1, "verify-bad", "bad", Verdict.BAD),
            ]
            for end in reversed(ends) if self.bad_end_first else ends:
                if end.verdict is None:
                    return Probe(self.assignment(end.index), end.purpose, window, estimate)
                if end.verdict is not end.expected:
                    return EndCheckFailed(end.end, self.assignment(end.index), end.verdict)

        lo, hi = 0, n - 1
        skipped: set[int] = set()
        while hi - lo > 1:
            for index in _around((lo + hi) // 2, lo, hi):
                if index in skipped:
                    continue
                verdict = seen(index)
                if verdict is None:
                    window, left = self._window(lo, hi), binary_steps(hi - lo)
                    return Probe(self.assignment(index), "search", window, left)
                if verdict is Verdict.SKIP:
                    skipped.add(index)
                    continue
                if verdict is Verdict.BAD:
                    hi = index
                else:
                    lo = index
                break
            else:
                return NumericOutcome(
                    self.key,
                    "inconclusive",
                    self.candidates[lo],
                    self.candidates[hi],
                    suspects=[self.candidates[i] for i in range(lo + 1, hi + 1)],
                )
        return NumericOutcome(self.key, "found", self.candidates[lo], self.candidates[hi])


def _around(mid: int, lo: int, hi: int) -> Iterator[int]:
    """Indices strictly inside (lo, hi), nearest to `mid` first, the upper neighbour before the lower."""
    yield mid
    for distance in range(1, hi - lo):
        above, below = mid + distance, mid - distance
        if above >= hi and below <= lo:
            return
        if above < hi:
            yield above
        if below > lo:
            yield below
