"""The rolling deploy: one member at a time out of the router, drained, deployed, proved, put back.

canary (the first member to change, alone) -> batches of `serial`. Per member: refuse if taking it out
leaves fewer than `min_healthy` healthy workers; take it out of the gateway and confirm no new requests
reach it; wait until the gateway's own count of its requests is 0 where the gateway keeps one (SMG's
drain window), then until the worker's own load is 0 (`drain_timeout`), and finish the removal, so
the gateway holds no entry its health checker could put back; deploy with the single-host pipeline,
smoke included; add back (with the settings the gateway had for it) and wait until the gateway lists
it healthy; watch it for `soak` seconds.
A failed member stays out of the router. The canary failing, or more than `max_fail` members failing,
halts the roll. A background resync keeps the router's worker list equal to the record's in-service
set (a restarted router forgets every worker; a member out of service is never re-admitted).

The roll talks to the router through `RouterPort` and to each host through `MemberOps`, so its logic
is tested in-process against fakes and on the lab against the real router and real hosts.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import wait
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

from k26ctl.documents import tagged
from k26ctl.errors import ExitCode, Interrupted, K26Error, UsageError
from k26ctl.fleet import record as rec
from k26ctl.fleet.record import LocalStore, MemberState, RunRecord
from k26ctl.fleet.router import Worker
from k26ctl.threads import in_thread


class RouterPort(Protocol):
    """The gateway in front of the fleet (sglang-router 0.3.x or SMG), through its own API."""

    def workers(self) -> list[Worker]: ...
    def add(self, url: str, *, timeout: float = ..., settings: dict[str, Any] | None = ...) -> Worker: ...
    def remove(self, url: str, *, timeout: float = ...) -> bool: ...
    # stop new requests; the settings to restore at `add`, None when not listed
    def take_out(self, url: str, *, timeout: float = ..., settle: float = ...) -> dict[str, Any] | None: ...
    def in_flight(self, url: str) -> int | None: ...  # the gateway's count while it drains; None: it has none


@dataclass
class ApplyOutcome:
    ok: bool
    config: str  # what the host runs now: new | old | unknown
    message: str = ""
    changed: bool = True
    seconds: float = 0.0
    data: dict[str, Any] = field(default_factory=dict)  # the deploy's JSON document


class MemberOps(Protocol):
    """Everything the roll does on one member's host."""

    name: str
    url: str
    fingerprint: str  # of the target profile

    def pending(self) -> bool: ...  # the host differs from the target
    def load(self) -> int | None: ...  # requests running or queued on the worker; None: it does not answer
    def apply(self) -> ApplyOutcome: ...  # deploy (or roll back) and smoke, directly on the host
    def note(self, entry: dict[str, Any]) -> None: ...  # append to the host's fleet record
    def close(self) -> None: ...


@dataclass
class RollOptions:
    serial: int = 1
    max_fail: int = 0
    min_healthy: int = 1
    drain_timeout: float = 300.0
    add_timeout: float = 120.0
    soak: float = 10.0
    remove_timeout: float = 10.0
    poll: float = 0.5
    sync_interval: float = 1.0
    resume: bool = False
    action: str = "deploy"  # deploy | rollback


@dataclass(frozen=True)
class RollEvent:
    kind: str  # phase | step | warning | resync | batch | halt
    member: str
    message: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class RollResult:
    record: RunRecord
    exit_code: int
    wall_seconds: float
    order: list[str]

    @property
    def status(self) -> str:
        return self.record.status

    def where(self) -> dict[str, str]:
        return {n: rec.describe(s.phase, s.config) for n, s in self.record.members.items()}

    def to_json(self) -> dict[str, Any]:
        return tagged(
            "fleet-roll",
            {
                "kind": "fleet-roll",
                "fleet": self.record.fleet,
                "run_id": self.record.run_id,
                "action": self.record.action,
                "status": self.record.status,
                "reason": self.record.reason,
                "exit_code": self.exit_code,
                "wall_seconds": round(self.wall_seconds, 3),
                "order": self.order,
                "members": {
                    n: {**s.__dict__, "where": rec.describe(s.phase, s.config)}
                    for n, s in self.record.members.items()
                },
            },
        )


class StepFailed(Exception):
    def __init__(self, step: str, message: str, config: str) -> None:
        super().__init__(message)
        self.step, self.message, self.config = step, message, config


class Roll:
    def __init__(
        self,
        fleet: str,
        members: list[MemberOps],
        router: RouterPort,
        options: RollOptions,
        store: LocalStore,
        on_event: Callable[[RollEvent], None] | None = None,
        *,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.fleet, self.members, self.router, self.opts, self.store = fleet, members, router, options, store
        self._emit_cb = on_event
        self._sleep, self._clock = sleep, clock
        self._lock = threading.RLock()  # record changes and every router change happen under it
        self._stop_sync = threading.Event()
        self._cancel = threading.Event()
        self.record: RunRecord | None = None
        self._by_url = {m.url: m for m in members}

    # ---- the run ----------------------------------------------------------------------------------

    def run(self) -> RollResult:
        started = self._clock()
        self.record = self._open_record()
        order: list[str] = []
        sync = threading.Thread(target=self._sync_loop, name="fleet-resync", daemon=True)
        try:
            self.resync()
            sync.start()
            todo = self._plan()
            order = [m.name for m in todo]
            if not todo:
                self._finish(rec.DONE, "every member is already at the target")
            else:
                self._roll(todo)
        except KeyboardInterrupt:
            self._interrupted("Ctrl-C")
        except Interrupted as exc:  # the single-host pipeline says what it left behind
            self._interrupted(exc.message)
        finally:
            self._stop_sync.set()
            if sync.is_alive():
                sync.join(timeout=10)
            for member in self.members:
                member.close()
        if self.record.status == rec.RUNNING:  # a refused precondition ends the run without a verdict
            self._finish(rec.HALTED, self.record.reason or "stopped")
        self.resync()
        code = {rec.DONE: ExitCode.OK, rec.STOPPED: ExitCode.INTERRUPTED}.get(
            self.record.status, ExitCode.FAILED
        )
        return RollResult(self.record, code, self._clock() - started, order)

    def _open_record(self) -> RunRecord:
        previous = self.store.load()
        names = [m.name for m in self.members]
        targets = {m.name: m.fingerprint for m in self.members}
        left_out = previous is not None and any(not s.in_service for s in previous.members.values())
        if previous is not None and previous.unfinished and left_out and set(previous.members) == set(names):
            if not self.opts.resume:
                raise UsageError(
                    f"fleet {self.fleet}: the last roll ({previous.run_id}) is {previous.status}: "
                    f"{previous.reason or 'not finished'}",
                    "continue it with --resume (members out of the router stay out until then); "
                    "`k26ctl status FLEET` shows where each member stands",
                )
            previous.status, previous.reason, previous.finished = rec.RUNNING, "", ""
            previous.targets, previous.action = targets, self.opts.action
            self.store.save(previous)
            return previous
        if self.opts.resume:
            raise UsageError(f"fleet {self.fleet}: no halted roll to resume", "run the roll without --resume")
        record = RunRecord.new(self.fleet, self.opts.action, names, targets)
        self.store.save(record)
        return record

    def _plan(self) -> list[MemberOps]:
        """Members out of service first (a resumed roll restarts with them), then those that differ."""
        assert self.record is not None
        out, changing = [], []
        for member in self.members:
            state = self.record.members[member.name]
            if not state.in_service:
                out.append(member)
            elif state.phase == rec.NEW and state.fingerprint == member.fingerprint:
                continue  # done earlier in this (resumed) run
            elif member.pending():
                changing.append(member)
            else:
                self._set(member, rec.NEW, config="new", detail="already at the target",
                          fingerprint=member.fingerprint)  # fmt: skip
        return out + changing

    def _roll(self, todo: list[MemberOps]) -> None:
        batches = [todo[:1]] + [todo[i : i + self.opts.serial] for i in range(1, len(todo), self.opts.serial)]
        failures = 0
        for index, batch in enumerate(batches):
            names = [m.name for m in batch]
            label = "canary" if index == 0 else f"batch {index}"
            self._emit("batch", ",".join(names), f"{label}: {', '.join(names)}")
            shortfall = self._capacity_shortfall(batch)
            if shortfall:
                self._finish(rec.HALTED, f"refused to take {', '.join(names)} out: {shortfall}")
                return
            results = self._run_batch(batch)
            failures += results.count(False)
            if index == 0 and not results[0]:
                self._finish(rec.HALTED, f"canary {names[0]} failed: {self._detail(batch[0])}")
                return
            if failures > self.opts.max_fail:
                failed = [m.name for m, ok in zip(batch, results, strict=True) if not ok]
                self._finish(
                    rec.HALTED, f"{', '.join(failed)} failed ({failures} > --max-fail {self.opts.max_fail})"
                )
                return
        verdict = "done" if failures == 0 else f"done with {failures} member(s) failed (<= --max-fail)"
        self._finish(rec.DONE if failures == 0 else rec.HALTED, verdict)

    def _run_batch(self, batch: list[MemberOps]) -> list[bool]:
        if len(batch) == 1:
            return [self._roll_member(batch[0])]
        results: dict[str, bool] = {}

        def run(member: MemberOps) -> None:
            results[member.name] = self._roll_member(member)

        threads = [threading.Thread(target=run, args=(m,), name=f"roll-{m.name}") for m in batch]
        for thread in threads:
            thread.start()
        try:
            for thread in threads:
                while thread.is_alive():
                    thread.join(0.2)
        except KeyboardInterrupt:
            self._cancel.set()  # each member stops at its next step boundary
            self._emit("warning", "", "Ctrl-C: waiting for the batch's running steps to end")
            for thread in threads:
                thread.join()
            raise
        return [results.get(m.name, False) for m in batch]

    # ---- one member -------------------------------------------------------------------------------

    def _roll_member(self, member: MemberOps) -> bool:
        assert self.record is not None
        state = self.record.members[member.name]
        config = state.config
        state.seconds = {}  # this attempt's steps only
        try:
            if state.in_service:
                self._check_cancel()
                self._timed(member, "remove", lambda: self._remove(member), "old")
                self._check_cancel()
                self._timed(member, "drain", lambda: self._drain(member, config), config)
            self._check_cancel()
            self._set(member, rec.DEPLOYING, detail=f"{self.opts.action} running")
            outcome = self._timed(member, "deploy", member.apply, "unknown")
            self._split_smoke(member, outcome)
            if not outcome.ok:
                raise StepFailed(
                    self.opts.action, outcome.message or f"{self.opts.action} failed", outcome.config
                )
            self._set(
                member, rec.VERIFIED, config="new", detail=outcome.message, fingerprint=member.fingerprint
            )
            self._check_cancel()
            self._timed(member, "add", lambda: self._add(member), "new")
            self._timed(member, "soak", lambda: self._soak(member), "new")
            self._set(member, rec.NEW, config="new", detail="serving")
            return True
        except StepFailed as failure:
            self._fail(member, failure)
            return False

    def _split_smoke(self, member: MemberOps, outcome: ApplyOutcome) -> None:
        """The deploy's own smoke step, out of the deploy's time into a step of its own."""
        steps = outcome.data.get("steps") if isinstance(outcome.data, dict) else None
        smoke = [s.get("seconds") for s in steps or [] if isinstance(s, dict) and s.get("name") == "smoke"]
        if not smoke or not isinstance(smoke[0], (int, float)):
            return
        with self._lock:
            assert self.record is not None
            seconds = self.record.members[member.name].seconds
            if "deploy" in seconds:
                seconds["smoke"] = round(min(float(smoke[0]), seconds["deploy"]), 3)
                seconds["deploy"] = round(seconds["deploy"] - seconds["smoke"], 3)

    def _timed(self, member: MemberOps, step: str, fn: Callable[[], Any], config: str) -> Any:
        """Run one step; an error the host or router raises fails the member at this step."""
        t0 = self._clock()
        try:
            return fn()
        except Interrupted:
            raise
        except K26Error as exc:
            raise StepFailed(step, exc.one_line(), config) from None
        finally:
            seconds = self._clock() - t0
            with self._lock:
                assert self.record is not None
                self.record.members[member.name].seconds[step] = round(seconds, 3)
            self._emit("step", member.name, f"{step} {seconds:.1f}s", {"step": step, "seconds": seconds})

    def _remove(self, member: MemberOps) -> None:
        with self._lock:
            self._set(member, rec.REMOVING, detail="DELETE from the router")
            try:
                kept = self.router.take_out(
                    member.url, timeout=self.opts.remove_timeout, settle=self.opts.drain_timeout
                )
            except K26Error as exc:
                # not confirmed gone: the member may still take traffic, and the old config serves it
                self._set(member, rec.OLD, detail=f"removal not confirmed: {exc.message}")
                raise StepFailed("remove", f"removal not confirmed: {exc.message}", "old") from None
            if kept:
                assert self.record is not None
                self.record.members[member.name].gateway = kept  # saved by the _set below
            self._set(member, rec.DRAINING, config="old", detail="out of the router, draining")

    def _drain(self, member: MemberOps, config: str) -> None:
        deadline = self._clock() + self.opts.drain_timeout
        self._drain_gateway(member, config, deadline)
        zero_reads = 0
        while True:
            load = member.load()
            if load is None:
                return  # the worker does not answer: nothing runs there to wait for
            zero_reads = zero_reads + 1 if load == 0 else 0
            if zero_reads >= 2:  # twice, a poll apart: a request the router sent just before DELETE lands
                return
            if self._clock() >= deadline:
                raise StepFailed(
                    "drain", f"{load} request(s) still running after {self.opts.drain_timeout:g} s", config
                )
            self._check_cancel()
            self._sleep(self.opts.poll)

    def _drain_gateway(self, member: MemberOps, config: str, deadline: float) -> None:
        """Wait on the gateway's own count of the member's running requests (SMG lists a worker taken
        out as draining, with its load), then end its drain window: the entry goes, so nothing the
        gateway does can route to the member before the roll's verdict. sglang-router keeps no count."""
        zero_reads, first, count = 0, None, self._gateway_count(member)
        while count is not None:
            first = count if first is None else first
            zero_reads = zero_reads + 1 if count == 0 else 0
            if zero_reads >= 2:
                break
            if self._clock() >= deadline:
                raise StepFailed(
                    "drain",
                    f"the gateway counts {count} request(s) in flight after {self.opts.drain_timeout:g} s",
                    config,
                )
            self._check_cancel()
            self._sleep(self.opts.poll)
            count = self._gateway_count(member)
        if first is not None:
            if zero_reads >= 2:
                message = (
                    f"its count of requests in flight went from {first} to 0"
                    if first
                    else "it counted no request in flight"
                )
                self._emit("gateway", member.name, message, {"first": first})
            with self._lock:
                self._quietly_remove(member)  # ends the window; a restarted gateway holds nothing anyway

    def _gateway_count(self, member: MemberOps) -> int | None:
        """The gateway's count for the member; None when it keeps none or does not answer now (a
        restarted gateway forgot the member: the worker's own load decides the drain then)."""
        try:
            return self.router.in_flight(member.url)
        except K26Error as exc:
            self._emit("warning", member.name, f"the gateway's drain count: {exc.message}")
            return None

    def _add(self, member: MemberOps) -> None:
        with self._lock:
            self._set(member, rec.ADDING, detail="POST to the router")
            try:
                self.router.add(member.url, timeout=self.opts.add_timeout, settings=self._kept(member))
            except K26Error as exc:
                self._quietly_remove(member)
                raise StepFailed("add", f"not admitted by the router: {exc.message}", "new") from None
            self._set(member, rec.SOAKING, detail=f"soaking {self.opts.soak:g} s")

    def _soak(self, member: MemberOps) -> None:
        deadline = self._clock() + self.opts.soak
        while self._clock() < deadline:
            self._sleep(min(self.opts.poll, max(0.0, deadline - self._clock())))
            if member.load() is None:
                with self._lock:
                    self._quietly_remove(member)
                raise StepFailed("soak", "the worker stopped answering while soaking", "new")
            try:
                listed = {w.url: w for w in self.router.workers()}
            except K26Error:
                continue  # the router is down: the resync re-admits the member when it is back
            worker = listed.get(member.url)
            if worker is not None and not worker.healthy:
                with self._lock:
                    self._quietly_remove(member)
                raise StepFailed("soak", "the router marked the worker unhealthy while soaking", "new")

    def _kept(self, member: MemberOps) -> dict[str, Any]:
        """The gateway's settings for the member (SMG: priority, cost) as they were at take-out."""
        assert self.record is not None
        return dict(self.record.members[member.name].gateway)

    def _quietly_remove(self, member: MemberOps) -> None:
        try:
            self.router.remove(member.url, timeout=self.opts.remove_timeout)
        except K26Error as exc:
            self._emit("warning", member.name, f"could not take it out of the router: {exc.message}")

    def _check_cancel(self) -> None:
        if self._cancel.is_set():
            raise KeyboardInterrupt

    def _fail(self, member: MemberOps, failure: StepFailed) -> None:
        assert self.record is not None
        if self.record.members[member.name].phase in rec.IN_SERVICE:
            return  # nothing was changed (removal not confirmed): it stays where it was
        self._set(member, rec.FAILED, config=failure.config, detail=f"{failure.step}: {failure.message}")

    def _detail(self, member: MemberOps) -> str:
        assert self.record is not None
        return self.record.members[member.name].detail

    # ---- capacity, resync, interrupts -------------------------------------------------------------

    def _capacity_shortfall(self, batch: list[MemberOps]) -> str:
        assert self.record is not None
        leaving = {m.name for m in batch}
        try:
            listed = self.router.workers()
        except K26Error as exc:
            return f"cannot read the router's workers: {exc.message}"
        healthy = [
            w for w in listed
            if w.healthy and w.url in self._by_url and self._by_url[w.url].name not in leaving
            and self.record.members[self._by_url[w.url].name].in_service
        ]  # fmt: skip
        if len(healthy) < self.opts.min_healthy:
            return f"{len(healthy)} healthy worker(s) would remain, --min-healthy is {self.opts.min_healthy}"
        return ""

    def resync(self) -> None:
        """Make the router's list match the record: in-service members listed, the others not. The
        list is read under the same lock as the roll's own router changes, so it is never stale."""
        assert self.record is not None
        with self._lock:
            try:  # a draining entry takes no new request: it counts as not listed
                listed = {w.url for w in self.router.workers() if not w.draining}
            except K26Error:
                return
            missing = []
            for member in self.members:
                phase = self.record.members[member.name].phase
                if phase in rec.IN_SERVICE and member.url not in listed:
                    self._emit("resync", member.name, "in service but not listed by the router: adding it")
                    missing.append(member)
                elif phase in rec.OUT_OF_SERVICE and member.url in listed:
                    self._emit("resync", member.name, f"listed by the router while {phase}: removing it")
                    self._quietly_remove(member)
            self._readmit(missing)

    def _readmit(self, members: list[MemberOps]) -> None:
        """Add every member back at once: each add waits for the router to see the worker healthy (a
        second or more on SGLang), so one after another a restarted router would regain its capacity
        a member at a time while the roll waits for the lock."""
        add = partial(self.router.add, timeout=min(self.opts.add_timeout, 30.0))  # bounded: the roll waits
        adds = [
            (m, in_thread(partial(add, settings=self._kept(m)), m.url, name=f"readmit-{m.name}"))
            for m in members
        ]
        wait([added for _, added in adds])  # all of them end under the lock, whatever one raises
        for member, added in adds:
            try:
                added.result()
            except K26Error as exc:
                self._emit("warning", member.name, f"resync could not add it: {exc.message}")

    def _sync_loop(self) -> None:
        while not self._stop_sync.wait(self.opts.sync_interval):
            try:
                self.resync()
            except Exception as exc:  # the resync must never take the roll down
                self._emit("warning", "", f"resync: {exc}")

    def _interrupted(self, how: str) -> None:
        """Every member in flight ends out of the router, with what it runs read back when unsure."""
        assert self.record is not None
        for member in self.members:
            state = self.record.members[member.name]
            phase = state.phase
            if phase in (rec.REMOVING, rec.DRAINING, rec.ADDING, rec.SOAKING):  # DRAINING: SMG's window
                with self._lock:
                    self._quietly_remove(member)  # make "out of the router" true, whatever the router did
            if phase in rec.IN_SERVICE and phase != rec.SOAKING:
                continue  # untouched by this run
            config = "new" if phase in (rec.VERIFIED, rec.ADDING, rec.SOAKING) else state.config
            if phase == rec.DEPLOYING:
                config = self._config_now(member)
            self._set(member, rec.INTERRUPTED, config=config, detail=f"{how} during {phase}")
        self._finish(rec.STOPPED, how)

    def _config_now(self, member: MemberOps) -> str:
        """Read back whether the host matches the target (after an interrupted deploy)."""
        try:
            return "old" if member.pending() else "new"
        except (K26Error, OSError) as exc:
            self._emit("warning", member.name, f"could not read the host back: {exc}")
            return "unknown"

    # ---- record -----------------------------------------------------------------------------------

    def _set(self, member: MemberOps, phase: str, *, config: str | None = None, detail: str = "",
             fingerprint: str | None = None) -> None:  # fmt: skip
        with self._lock:
            assert self.record is not None
            state: MemberState = self.record.members[member.name]
            state.phase = phase
            if config is not None:
                state.config = config
            if fingerprint is not None:
                state.fingerprint = fingerprint
            state.detail = detail
            state.updated = rec.now_iso()
            self.store.save(self.record)
        self._emit(
            "phase", member.name, rec.describe(phase, state.config), {"phase": phase, "detail": detail}
        )
        if phase in (rec.DRAINING, rec.VERIFIED, rec.NEW, rec.FAILED, rec.INTERRUPTED):
            try:
                member.note({"run_id": self.record.run_id, "fleet": self.fleet, "phase": phase,
                             "config": state.config, "detail": detail, "at": state.updated})  # fmt: skip
            except Exception as exc:
                self._emit("warning", member.name, f"could not write the host's fleet record: {exc}")

    def _finish(self, status: str, reason: str) -> None:
        assert self.record is not None
        with self._lock:
            self.record.status, self.record.reason, self.record.finished = status, reason, rec.now_iso()
            self.store.save(self.record)
        self._emit("halt" if status != rec.DONE else "done", "", reason)

    def _emit(self, kind: str, member: str, message: str, data: dict[str, Any] | None = None) -> None:
        if self._emit_cb is not None:
            self._emit_cb(RollEvent(kind, member, message, data or {}))
