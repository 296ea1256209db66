"""Readiness as a pure state machine over observations (unit state, journal lines, HTTP probes, time).

The I/O loop in `k26ctl.deploy.wait` feeds it; tests feed it by hand. It decides three things: when the
service is ready (every probe passed), when it has failed (the unit failed or restarted, the main process
exited, or the journal shows a fatal error), and when the next HTTP probe is due (1 s at first, then
backing off, never slower than `poll_max`; at once when the journal says the server is ready).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from k26ctl.deploy.journal_scan import (
    JournalScanner,
    LoadProgress,
    Signal,
    classify,
    is_ready_line,
    stop_phase,
)


def _int(value: str | None) -> int:
    try:
        return int(value or 0)
    except ValueError:
        return 0


@dataclass(frozen=True)
class UnitState:
    """The systemd properties readiness looks at (`systemctl show`)."""

    active_state: str
    sub_state: str
    n_restarts: int = 0
    main_pid: int = 0
    exec_main_status: str = "0"
    result: str = "success"

    @classmethod
    def from_show(cls, props: Mapping[str, str]) -> UnitState:
        return cls(
            active_state=props.get("ActiveState", ""),
            sub_state=props.get("SubState", ""),
            n_restarts=_int(props.get("NRestarts")),
            main_pid=_int(props.get("MainPID")),
            exec_main_status=props.get("ExecMainStatus", "0") or "0",
            result=props.get("Result", "success") or "success",
        )

    @property
    def running(self) -> bool:
        return self.active_state in ("active", "activating", "reloading") and self.main_pid > 0

    def describe(self) -> str:
        return f"{self.active_state}/{self.sub_state} pid={self.main_pid} restarts={self.n_restarts}"


@dataclass(frozen=True)
class ProbeResult:
    ok: bool
    detail: str  # what the probe saw: "200", "503", "connection refused", "model x not served", ...
    # /v1/models answered 200 with a list that lacks the profile's served name: SGLang sets the name
    # once at start-up (or renames it to the new path on /update_weights_from_disk), so waiting will
    # not change it
    wrong_model: bool = False


WRONG_MODEL_PROBES = 3  # consecutive answers naming other models before readiness stops waiting


class OutcomeKind(str, enum.Enum):
    READY = "ready"
    FAILED = "failed"
    TIMEOUT = "timeout"


@dataclass(frozen=True)
class Outcome:
    kind: OutcomeKind
    reason: str
    lines: list[str] = field(default_factory=list)
    at: float = 0.0  # the caller's clock when the outcome was decided


UNIT_FAILURE_STATES = ("failed",)


@dataclass
class ReadinessMachine:
    """Observations in, an `Outcome` out. `now` is the caller's monotonic clock in seconds."""

    start: float
    timeout: float
    baseline: UnitState | None = None
    armed: bool = True  # False while journal lines may still belong to the process being replaced
    poll_initial: float = 1.0
    poll_max: float = 5.0
    fast_window: float = 15.0  # probe every poll_initial seconds for this long, then back off
    fatal_grace: float = 0.5  # after a fatal line, wait this long for its traceback to arrive
    journal_grace: float = 0.5  # after the unit state shows a failure, wait this long for its lines
    burst_window: float = 10.0  # after the weights are loaded, probe every burst_interval this long
    burst_interval: float = 0.2
    # This host's last measured load time (history): probe at the fast pace around when the server
    # should be ready, from a second before it to burst_window after.
    expected_load: float | None = None
    scanner: JournalScanner = field(default_factory=JournalScanner)

    outcome: Outcome | None = None
    progress: LoadProgress | None = None
    ready_line_seen: bool = False
    # from the first `Load weight end. elapsed=` line: every rank logs one for the target model, then
    # again for the draft model, so the first is the target's (the one a reload waits for)
    reported_load_seconds: float | None = None
    started_ts_us: int | None = None  # journal time of systemd's Started line
    ready_ts_us: int | None = None  # journal time of the ready line
    stop_begin_ts_us: int | None = None  # journal times of stopping the replaced process
    stop_end_ts_us: int | None = None
    last_probe: ProbeResult | None = None
    probes: int = 0
    _tracked_pid: int = 0
    _next_probe: float = 0.0
    _interval: float = 0.0
    _fatal_deadline: float | None = None
    _fatal_reason: str = ""
    _pending_kind: str = ""  # "line": a fatal journal line; "unit": the unit state said so
    _wrong_model: int = 0  # consecutive probes that found other models served
    _burst_from: float = 0.0
    _burst_until: float = 0.0
    last_unit: UnitState | None = None

    def __post_init__(self) -> None:
        self._interval = self.poll_initial
        if self.expected_load is not None and self.expected_load > 0:
            self._burst_from = self.start + max(0.0, self.expected_load - 1.0)
            self._burst_until = self.start + self.expected_load + self.burst_window
        self._next_probe = self.start + self.poll_initial
        if self.baseline is not None:
            self._tracked_pid = self.baseline.main_pid

    # ---- observations ---------------------------------------------------------------------------

    def on_unit(self, state: UnitState, now: float) -> Outcome | None:
        self.last_unit = state
        if self.outcome is not None:
            return self.outcome
        base = self.baseline
        reason = None
        if state.active_state in UNIT_FAILURE_STATES:
            reason = f"the unit failed (result={state.result}, exit status {state.exec_main_status})"
        elif state.sub_state == "auto-restart":
            reason = (
                f"the main process exited (status {state.exec_main_status}); systemd is about to restart it"
            )
        elif base is not None and state.n_restarts > base.n_restarts:
            reason = f"systemd restarted the service (NRestarts {base.n_restarts} -> {state.n_restarts})"
        elif self._tracked_pid and state.main_pid and state.main_pid != self._tracked_pid:
            reason = f"the main process changed (pid {self._tracked_pid} -> {state.main_pid})"
        elif self._tracked_pid and state.main_pid == 0:
            reason = f"the main process exited (status {state.exec_main_status}, unit {state.active_state})"
        elif state.active_state in ("inactive", "deactivating") and state.main_pid == 0:
            reason = f"the unit is {state.active_state} (status {state.exec_main_status})"
        if reason is not None:
            # The journal runs about 0.3 s behind `systemctl show`: give the process's last lines a
            # moment to arrive, so the report carries them (systemd's exit line ends the wait early).
            if self._fatal_deadline is None or self._pending_kind != "unit":
                self._fatal_deadline = now + self.journal_grace
                self._fatal_reason, self._pending_kind = reason, "unit"
            return None
        if not self._tracked_pid and state.main_pid:
            self._tracked_pid = state.main_pid
        return None

    def on_journal(self, message: str, now: float, *, timestamp_us: int | None = None) -> Outcome | None:
        if self.outcome is not None:
            if self.outcome.kind is OutcomeKind.READY and self.ready_ts_us is None and is_ready_line(message):
                self.ready_ts_us = timestamp_us  # the probe won the race against the ready line
            return self.outcome
        if not self.armed:
            phase = stop_phase(message)
            if phase == "stopping":
                self.stop_begin_ts_us = timestamp_us
            elif phase == "stopped":
                self.stop_end_ts_us = timestamp_us
            if classify(message).signal is not Signal.STARTED:
                return None  # still the old process shutting down
            self.armed = True
        event = self.scanner.feed(message)
        sig = event.signal
        if sig is Signal.STARTED:
            self.started_ts_us = timestamp_us
        elif sig is Signal.PROGRESS:
            self.progress = event.progress
            if event.progress is not None and event.progress.percent >= 100:
                self._burst(now)
        elif sig is Signal.LOAD_END:
            if self.reported_load_seconds is None:
                self.reported_load_seconds = event.load_seconds
            self._burst(now)
        elif sig is Signal.READY:
            self.ready_line_seen = True
            self.ready_ts_us = timestamp_us
            self._interval = self.poll_initial
            self._next_probe = now  # event-driven: probe at once
        elif sig is Signal.FATAL:
            if self._fatal_deadline is None:
                self._fatal_deadline = now + self.fatal_grace
                self._fatal_reason = f"fatal error in the journal ({event.detail})"
                self._pending_kind = "line"
        elif sig in (Signal.PROCESS_EXIT, Signal.UNIT_FAILED, Signal.RESTART):
            if self._pending_kind == "unit":
                return self._fail(self._fatal_reason, now)
            template = {
                Signal.PROCESS_EXIT: "the main process exited ({})",
                Signal.UNIT_FAILED: "the unit failed (result {})",
                Signal.RESTART: "systemd restarted the service ({})",
            }[sig]
            return self._fail(template.format(event.detail), now)
        if self._pending_kind == "line" and not self.scanner.in_traceback:
            return self._fail(self._fatal_reason, now)
        return None

    def on_probe(self, result: ProbeResult, now: float) -> Outcome | None:
        if self.outcome is not None:
            return self.outcome
        self.last_probe = result
        self.probes += 1
        self._wrong_model = self._wrong_model + 1 if result.wrong_model else 0
        if self._wrong_model >= WRONG_MODEL_PROBES:
            return self._fail(
                f"the server is up but does not serve the profile's model: {result.detail}; a "
                "different --served-model-name, or weights swapped at runtime (SGLang's "
                "/update_weights_from_disk renames the model to the new path): `k26ctl deploy --force` "
                "restarts it as the profile says",
                now,
            )
        if result.ok:
            self.outcome = Outcome(OutcomeKind.READY, "all readiness probes passed", at=now)
            return self.outcome
        if self._burst_from <= now < self._burst_until:
            self._next_probe = now + min(self.burst_interval, self._interval)
            return None
        if now - self.start >= self.fast_window and not self.ready_line_seen:
            self._interval = min(self.poll_max, self._interval * 1.5)
        self._next_probe = now + self._interval
        if now < self._burst_from:
            self._next_probe = min(self._next_probe, self._burst_from)
        return None

    def _burst(self, now: float) -> None:
        """Weights are in: the server is seconds from ready (the journal's ready line reaches us
        about 0.3 s late, journald batches change notifications), so probe briefly at a fast pace."""
        self._burst_from = min(self._burst_from, now) if self._burst_until > now else now
        self._burst_until = max(self._burst_until, now + self.burst_window)
        self._next_probe = min(self._next_probe, now + self.burst_interval)

    def on_tick(self, now: float) -> Outcome | None:
        if self.outcome is not None:
            return self.outcome
        if self._fatal_deadline is not None and now >= self._fatal_deadline:
            return self._fail(self._fatal_reason, now)
        if now - self.start >= self.timeout:
            seen = f"; last probe: {self.last_probe.detail}" if self.last_probe else ""
            self.outcome = Outcome(
                OutcomeKind.TIMEOUT,
                f"not ready after {self.timeout:.0f} s (readiness.timeout){seen}",
                lines=self.scanner.tail[-10:],
                at=now,
            )
            return self.outcome
        return None

    # ---- scheduling -----------------------------------------------------------------------------

    def probe_due(self, now: float) -> bool:
        return self.outcome is None and self._fatal_deadline is None and now >= self._next_probe

    def next_wakeup(self, now: float) -> float:
        """The latest time the caller may sleep until before something must be checked."""
        times = [self.start + self.timeout]
        if self._fatal_deadline is not None:
            times.append(self._fatal_deadline)  # no probing while the evidence arrives
        else:
            times.append(self._next_probe)
        return max(now, min(times))

    @property
    def server_load_seconds(self) -> float | None:
        """Start-to-ready time as the host's journal measured it (the server's own load time)."""
        if self.started_ts_us is None or self.ready_ts_us is None:
            return None
        return max(0.0, (self.ready_ts_us - self.started_ts_us) / 1e6)

    @property
    def server_stop_seconds(self) -> float | None:
        """How long the replaced process took to stop, as the host's journal measured it."""
        if self.stop_begin_ts_us is None or self.stop_end_ts_us is None:
            return None
        return max(0.0, (self.stop_end_ts_us - self.stop_begin_ts_us) / 1e6)

    def _fail(self, reason: str, now: float) -> Outcome:
        self.outcome = Outcome(OutcomeKind.FAILED, reason, lines=self.scanner.evidence(), at=now)
        return self.outcome
