"""The watch loop: cycles at a jittered interval, re-checks before a state change, backs off when busy.

Each step reads the server's load first; while requests queue (`max_queue` or more waiting) the cycle
is skipped and the next wait doubles, up to `max_backoff` times the interval. Otherwise the canary runs,
is judged, and, when its verdict differs from the state, is re-checked at once (machine.py). A
step's cost is bounded: at most two cycles, each a fixed number of requests of capped length (18 at
the defaults: identity, server info, token-id check, the prompts, the flush, the probes' batches)
sent in about ten rounds one after the other, each request within `request_timeout`. So even a
server that answers nothing in time holds a step for a bounded time, and the cost is reported.
"""

from __future__ import annotations

import random
import socket
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from k26ctl.errors import K26Error
from k26ctl.smoke.runner import SmokeTarget
from k26ctl.smoke.suite import Suite
from k26ctl.watch.canary import (
    CanarySettings,
    CycleResult,
    canary_slice,
    cycle_period,
    run_cycle,
    slice_count,
)
from k26ctl.watch.load import flush_refusal, read_load
from k26ctl.watch.machine import StateMachine
from k26ctl.watch.metrics import WatchMetrics
from k26ctl.watch.store import WatchStore
from k26ctl.watch.verdict import JudgeRules, Verdict, judge

SKIPPED = "skipped"


@dataclass(frozen=True)
class WatchConfig:
    interval: float = 60.0
    jitter: float = 0.1  # each wait is interval x (1 +- jitter)
    max_queue: float = 1.0
    max_backoff: float = 8.0
    canary: CanarySettings = field(default_factory=CanarySettings)
    rules: JudgeRules = field(default_factory=JudgeRules)


TargetOpener = Callable[[], AbstractContextManager[SmokeTarget]]


@dataclass
class StepOutcome:
    record: dict[str, Any]
    state: str
    skipped: bool = False


class Watcher:
    def __init__(
        self,
        open_target: TargetOpener,
        suite: Suite,
        config: WatchConfig,
        store: WatchStore,
        metrics: WatchMetrics | None = None,
        emit: Callable[[dict[str, Any]], None] | None = None,
        api_key: str | None = None,
        label: str = "",
        on_change: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.open_target = open_target
        self.suite = suite
        self.config = config
        self.store = store
        self.metrics = metrics
        self.emit = emit or (lambda _record: None)
        self.api_key = api_key
        self.label = label
        self.on_change = on_change
        self.machine = StateMachine()
        self.stop = threading.Event()
        self.cycles = 0
        self._backoff = 0
        self._random = random.Random()
        self._slice = (0, 1)  # (index, count) of the canary slice the current step runs

    # ---- one cycle -------------------------------------------------------------------------------

    def _cycle(self, step: int) -> tuple[CycleResult, Verdict] | None:
        """One judged canary cycle for step `step` (its slice, in its order), or None when the server is
        saturated (skipped)."""
        count = slice_count(self.suite, self.config.canary.prompts)
        try:
            with self.open_target() as target:
                load = read_load(target.base_url, self.api_key)
                if load is not None and load.queued >= self.config.max_queue:
                    return None
                cycle = run_cycle(
                    target,
                    canary_slice(self.suite, self.config.canary.prompts, step),
                    self.config.canary,
                    self.store.slice_baseline(step % count, count),
                    probe_flush=lambda: flush_refusal(read_load(target.base_url, self.api_key)),
                )
        except K26Error as exc:  # the SSH connection or its port forward: unreachable too
            cycle = CycleResult(time.time(), 0.0, unreachable=exc.one_line())
        self.cycles += 1
        verdict = judge(cycle, self.config.rules)
        if self.metrics is not None:
            self.metrics.record_cycle(cycle, verdict)
        return cycle, verdict

    def step(self) -> StepOutcome:
        """A cycle and, when its verdict differs from the state, the immediate re-check (on the same
        slice of the canary's pool); the next step takes the next slice."""
        count = slice_count(self.suite, self.config.canary.prompts)
        period = cycle_period(self.suite, self.config.canary.prompts)
        step = self.store.next_slice(period)
        self.store.advance_slice(step, period)
        self._slice = (step % count, count)
        first = self._cycle(step)
        if first is None:
            self._backoff += 1
            if self.metrics is not None:
                self.metrics.record_backoff()
            skipped: dict[str, Any] = {
                "time": _now(),
                "verdict": SKIPPED,
                "state": self.machine.state,
                "reason": "the server is saturated (requests queue); backing off",
            }
            self.emit(skipped)
            return StepOutcome(skipped, self.machine.state, skipped=True)
        self._backoff = 0
        cycle, verdict = first
        recheck: tuple[CycleResult, Verdict] | None = None
        if self.machine.needs_recheck(verdict.state):
            recheck = self._cycle(step)
        second = recheck[1].state if recheck is not None else None
        if recheck is None and self.machine.needs_recheck(verdict.state):
            second = self.machine.state  # the re-check was skipped (saturated): nothing confirmed
        unconfirmed_before = self.machine.unconfirmed
        transition = self.machine.settle(verdict.state, second)
        shown_cycle, shown = recheck if recheck is not None else (cycle, verdict)
        record = self._record(shown_cycle, shown, verdict if recheck is not None else None)
        record["changed"] = transition.changed
        if self.metrics is not None:
            self.metrics.set_state(self.machine.state)
            if transition.changed:
                self.metrics.record_change()
            if self.machine.unconfirmed > unconfirmed_before:
                self.metrics.record_unconfirmed()
        if transition.changed:
            change = {
                "time": record["time"],
                "before": transition.before,
                "after": transition.after,
                "target": self.label,
                "watcher": socket.gethostname(),  # the operator's machine or the served host
                "reasons": shown.reasons,
                "evidence": shown.evidence,
            }
            self.store.append_history(change)
            if self.on_change is not None:
                try:
                    self.on_change(change)
                except K26Error as exc:  # the host may be the thing that is down: keep watching
                    record["host_history_error"] = exc.one_line()
        self.store.write_last(record)
        self.emit(record)
        return StepOutcome(record, self.machine.state)

    def _record(self, cycle: CycleResult, verdict: Verdict, first: Verdict | None) -> dict[str, Any]:
        report = cycle.report
        record: dict[str, Any] = {
            "time": _now(),
            "target": self.label,
            "state": self.machine.state,
            "verdict": verdict.state,
            "reasons": verdict.reasons,
            "evidence": verdict.evidence,
            "cycle_s": round(cycle.elapsed, 3),
            "requests": cycle.requests,
            "generated_tokens": cycle.generated_tokens,
            "prompt_tokens": cycle.prompt_tokens,
            "baseline_recorded": cycle.baseline_recorded,
            "drifted": verdict.drifted,
            "cycles": self.cycles,
            "slice": f"{self._slice[0] + 1}/{self._slice[1]}",
        }
        if report is not None:
            record["model"] = report.model
            record["accept_length"] = report.measured_accept_length
            record["prompts"] = [r.prompt_id for r in report.results]
            if report.lossy_levers:
                record["lossy_levers"] = report.lossy_levers
        if first is not None:
            record["recheck_of"] = {"verdict": first.state, "reasons": first.reasons}
        return record

    # ---- the loop --------------------------------------------------------------------------------

    def next_wait(self) -> float:
        base = self.config.interval * min(2.0**self._backoff, self.config.max_backoff)
        return max(0.0, base * (1.0 + self._random.uniform(-self.config.jitter, self.config.jitter)))

    def run(self, max_steps: int | None = None, on_step: Callable[[StepOutcome], None] | None = None) -> str:
        """Steps until `stop` is set (or `max_steps`), one starting every jittered interval."""
        steps = 0
        while not self.stop.is_set():
            started = time.monotonic()
            outcome = self.step()
            if on_step is not None:
                on_step(outcome)
            steps += 1
            if max_steps is not None and steps >= max_steps:
                break
            # steps start every interval (not an interval after the last one ended): a fault is seen
            # by the step that starts next, however long the steps take
            self.stop.wait(max(0.0, self.next_wait() - (time.monotonic() - started)))
        return self.machine.state


def exit_code(state: str, skipped: bool) -> int:
    """Smoke's exit codes for `--once`: 0 healthy (or degraded), 1 failing, 69 unreachable; 75 when
    the server was too busy to be checked (EX_TEMPFAIL: try again later)."""
    from k26ctl.watch.verdict import EXIT_CODES

    if skipped:
        return 75
    return EXIT_CODES.get(state, 1)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
