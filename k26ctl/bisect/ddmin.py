"""Set mode: which of the keys that differ between a good and a bad profile make the output bad.

Delta debugging (Zeller and Hildebrandt's ddmin) over the differing keys finds a 1-minimal
failure-inducing subset: applying it to the good profile is bad, and dropping any one key from it is
not. Probes that cannot be judged (skip) count as "not bad", the usual treatment of unresolved tests.
Afterwards each numeric key of that subset can be bisected between its good and bad value, with the
other culprits held at their bad values.

The algorithm is written as an ordinary loop over an oracle. The oracle looks verdicts up in the
recorded history and interrupts the loop with the first configuration it has not seen: that is the
next probe. Re-running the loop after each new verdict is cheap and keeps the strategy pure.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from k26ctl.bisect.numeric import NumericSearch
from k26ctl.bisect.plan import (
    Change,
    EndCheckFailed,
    Lookup,
    NumericOutcome,
    Plan,
    Probe,
    SetOutcome,
    binary_steps,
)
from k26ctl.search.assignment import Assignment, assignment_id
from k26ctl.search.verdict import Verdict


class _Unknown(Exception):
    def __init__(self, subset: tuple[int, ...]) -> None:
        self.subset = subset


def _split(items: Sequence[int], parts: int) -> list[tuple[int, ...]]:
    """`parts` contiguous chunks whose sizes differ by at most one (larger chunks first)."""
    size, extra = divmod(len(items), parts)
    chunks, start = [], 0
    for i in range(parts):
        end = start + size + (1 if i < extra else 0)
        chunks.append(tuple(items[start:end]))
        start = end
    return chunks


def ddmin(changes: Sequence[int], fails: Callable[[tuple[int, ...]], bool]) -> tuple[int, ...]:
    """A 1-minimal subset of `changes` for which `fails` holds, assuming fails(all) and not fails(())."""
    current = tuple(changes)
    granularity = 2
    while len(current) >= 2:
        chunks = _split(current, granularity)
        reduced = False
        for chunk in chunks:
            if fails(chunk):
                current, granularity, reduced = chunk, 2, True
                break
        if not reduced and granularity > 2:  # with two chunks each complement is the other chunk
            for chunk in chunks:
                complement = tuple(i for i in current if i not in chunk)
                if fails(complement):
                    current, granularity, reduced = complement, max(granularity - 1, 2), True
                    break
        if not reduced:
            if granularity >= len(current):
                break
            granularity = min(len(current), granularity * 2)
    return current


def is_numeric(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class SetSearch:
    changes: Sequence[Change]
    verify_ends: bool = True
    refine: bool = True  # bisect integer culprits between their good and bad values

    def __post_init__(self) -> None:
        if not self.changes:
            raise ValueError("the good and the bad profile do not differ")

    def assignment(self, subset: Sequence[int]) -> Assignment:
        return {self.changes[i].key: self.changes[i].bad for i in subset}

    def _estimate(self, size: int) -> int:
        # a single culprit costs about two probes per halving; a rough figure for progress only
        return max(1, 2 * binary_steps(size))

    def plan(self, lookup: Lookup) -> Plan:
        everything = tuple(range(len(self.changes)))
        if self.verify_ends:
            good_seen, bad_seen = lookup(self.assignment(())), lookup(self.assignment(everything))
            left = (good_seen is None) + (bad_seen is None) + self._estimate(len(everything))
            window = f"{len(everything)} changed keys"
            if good_seen is None:
                return Probe(self.assignment(()), "verify-good", window, left)
            if good_seen is not Verdict.GOOD:
                return EndCheckFailed("good", self.assignment(()), good_seen)
            if bad_seen is None:
                return Probe(self.assignment(everything), "verify-bad", window, left)
            if bad_seen is not Verdict.BAD:
                return EndCheckFailed("bad", self.assignment(everything), bad_seen)

        empty, full = assignment_id(self.assignment(())), assignment_id(self.assignment(everything))

        def known(assignment: Assignment) -> Verdict | None:
            """The history, with the ends taken as claimed (they were verified, or the user vouched)."""
            ident = assignment_id(assignment)
            if ident == empty:
                return Verdict.GOOD
            if ident == full:
                return Verdict.BAD
            return lookup(assignment)

        def fails(subset: tuple[int, ...]) -> bool:
            seen = known(self.assignment(subset))
            if seen is None:
                raise _Unknown(subset)
            return seen is Verdict.BAD

        try:
            culprit_ids = ddmin(everything, fails)
        except _Unknown as need:
            window = f"{len(self.changes)} changed keys, testing {len(need.subset)} of them"
            return Probe(self.assignment(need.subset), "search", window, self._estimate(len(need.subset)))

        culprits = [self.changes[i] for i in culprit_ids]
        refined: dict[str, NumericOutcome] = {}
        if self.refine:
            for change in culprits:
                search = self.refinement(change, culprits)
                if search is None:
                    continue
                result = search.plan(known)
                if isinstance(result, NumericOutcome):
                    refined[change.key] = result
                elif isinstance(result, EndCheckFailed):
                    continue  # cannot happen for a consistent history: ddmin already judged both ends
                else:
                    return result
        return SetOutcome(list(self.changes), culprits, refined)

    @staticmethod
    def refinement(change: Change, culprits: Sequence[Change]) -> NumericSearch | None:
        """The bisection of one integer culprit, others at their bad values; its ends are ddmin's probes."""
        if not (is_numeric(change.good) and is_numeric(change.bad)) or abs(change.bad - change.good) < 2:
            return None
        step = 1 if change.bad > change.good else -1
        base = {c.key: c.bad for c in culprits if c.key != change.key}
        return NumericSearch(
            change.key,
            list(range(change.good, change.bad + step, step)),
            verify_ends=True,
            base=base,
            neutral=change.good,
            has_neutral=True,
        )
