"""The watcher's state machine, with hysteresis.

A cycle whose verdict differs from the current state does not change it by itself: the watcher runs
an immediate re-check, and the state changes only when that re-check disagrees with the current
state too; it then takes the re-check's verdict (the latest evidence). One bad cycle among good ones
(a near tie, a request lost to a network blip) therefore changes nothing, while a real fault changes
the state one re-check after the first cycle that sees it. The very first verdict (state `unknown`)
is confirmed the same way unless it is healthy.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from k26ctl.watch.verdict import HEALTHY

UNKNOWN = "unknown"


@dataclass(frozen=True)
class Transition:
    before: str
    after: str

    @property
    def changed(self) -> bool:
        return self.before != self.after


@dataclass
class StateMachine:
    state: str = UNKNOWN
    unconfirmed: int = 0  # bad cycles whose re-check did not confirm them
    changes: list[Transition] = field(default_factory=list)

    def needs_recheck(self, verdict: str) -> bool:
        if verdict == self.state:
            return False
        return not (self.state == UNKNOWN and verdict == HEALTHY)

    def settle(self, verdict: str, recheck: str | None = None) -> Transition:
        """The state after a cycle's `verdict` and, when `needs_recheck` said so, its `recheck`."""
        before = self.state
        if not self.needs_recheck(verdict):
            self.state = verdict
        elif recheck is None:
            raise ValueError("a verdict that differs from the state needs its re-check")
        elif recheck != before:
            self.state = recheck
        else:
            self.unconfirmed += 1
        transition = Transition(before, self.state)
        if transition.changed:
            self.changes.append(transition)
        return transition
