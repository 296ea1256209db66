"""Waiting for a (re)started server to become ready, or failing fast when it will not.

Three sources feed `k26ctl.deploy.readiness.ReadinessMachine`: the unit's journal, followed live from
a cursor taken before the restart (the ready line triggers one probe at once, a fatal line fails the
wait); the unit's state from `systemctl show` every second (failed, restarted, main process gone);
and HTTP probes through the host's port forward (`/health`, then the served model in `/v1/models`),
every second at first and never slower than every five. If following the journal breaks, it is polled
from the last cursor instead.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any

from k26ctl import inputs
from k26ctl.deploy.gpu_memory import SAMPLE_INTERVAL, GpuMemory, MemoryProgress, read_gpu_memory, used_mib
from k26ctl.deploy.journal_scan import LoadProgress
from k26ctl.deploy.readiness import Outcome, OutcomeKind, ProbeResult, ReadinessMachine, UnitState
from k26ctl.profile import Profile
from k26ctl.remote.base import Host
from k26ctl.threads import in_thread

UNIT_PROPS = ("ActiveState", "SubState", "NRestarts", "MainPID", "ExecMainStatus", "Result")
UNIT_CHECK_INTERVAL = 1.0
JOURNAL_POLL_INTERVAL = 0.5  # when following the journal broke
PENDING_PROBE_TICK = 0.05  # a running probe wakes the loop when it answers; this bounds the wait anyway
PROBE_TIMEOUT = 5.0
PROBE_MAX_BODY = 1 << 20


@dataclass
class ReadinessResult:
    outcome: Outcome
    wall_seconds: float  # from the start of the wait to the outcome
    server_load_seconds: float | None  # the server's own start-to-ready time, from its journal
    server_stop_seconds: float | None  # how long the replaced process took to stop, from the journal
    reported_load_seconds: float | None  # SGLang's `Load weight end. elapsed=`
    probes: int
    progress: LoadProgress | None
    last_unit: UnitState | None = None  # the unit's state as last read during the wait
    gpu_memory_mib: int | None = None  # GPU memory in use (all GPUs) at the last sample, if any

    @property
    def ready(self) -> bool:
        return self.outcome.kind is OutcomeKind.READY


@dataclass(frozen=True)
class Progress:
    percent: int | None
    done: int | None
    total: int | None
    elapsed: float
    eta: float | None
    phase: str
    source: str = "journal"  # where the percentage comes from: "journal" (tqdm) or "gpu-memory"
    gpu_used_gib: float | None = None
    gpu_target_gib: float | None = None


ProgressCallback = Callable[[Progress], None]
LineCallback = Callable[[str], None]


class HttpProber:
    """Runs the profile's readiness probes in order over one keep-alive connection; all must pass.

    Each GET goes through `httpsafe.BoundedClient`: a total deadline per probe (a server dripping one
    byte a second cannot hold it) and a 1 MB cap on the body after decompression."""

    def __init__(self, address: str, port: int, profile: Profile, *, timeout: float = PROBE_TIMEOUT) -> None:
        self._address, self._port, self._timeout = address, port, timeout
        self._headers = {"Accept": "application/json"}
        key = inputs.api_key(profile.sglang.api_key_env)
        if key:
            self._headers["Authorization"] = f"Bearer {key}"
        self._paths = list(profile.readiness.probes)
        self._model = profile.served_name
        self._client: Any = None

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def _get(self, path: str) -> tuple[int, bytes]:
        from k26ctl.httpsafe import BoundedClient

        if self._client is None:
            host = f"[{self._address}]" if ":" in self._address else self._address
            self._client = BoundedClient(
                f"http://{host}:{self._port}",
                timeout=self._timeout,
                max_body=PROBE_MAX_BODY,
                headers=self._headers,
            )
        try:
            response = self._client.request("GET", path)
            return response.status_code, response.body
        except BaseException:
            self.close()
            raise

    def probe(self) -> ProbeResult:
        from k26ctl.httpsafe import HttpError
        from k26ctl.termsafe import clean

        for path in self._paths:
            try:
                status, body = self._get(path)
            except HttpError as exc:
                return ProbeResult(False, f"{path}: {type(exc).__name__}: {clean(exc, limit=120)}")
            if status != 200:
                return ProbeResult(False, f"{path}: HTTP {status}")
            if path.rstrip("/").endswith("/v1/models"):
                problem, wrong_model = self._check_models(body)
                if problem:
                    return ProbeResult(False, f"{path}: {problem}", wrong_model=wrong_model)
        return ProbeResult(True, "ok")

    def _check_models(self, body: bytes) -> tuple[str | None, bool]:
        """What is wrong with the model list (None: nothing), and whether it names other models."""
        from k26ctl.jsonsafe import loads
        from k26ctl.smoke.responses import ModelList, parse_answer
        from k26ctl.termsafe import clean

        try:
            ids = [card.id for card in parse_answer(ModelList, loads(body)).data]
        except ValueError as exc:
            return f"not a model list ({clean(exc, limit=120)})", False
        if self._model not in ids:
            return f"model {self._model!r} not served (serving {clean(ids, limit=200)})", bool(ids)
        return None, False


_WAKE = object()  # queued by JournalFeed.wake(): not an entry, only ends a wait in get()


class JournalFeed:
    """Journal entries after a cursor: followed in a thread, or polled when following fails."""

    def __init__(self, systemd: Any, cursor: str | None) -> None:
        self._systemd = systemd
        self._cursor = cursor
        self._queue: queue.Queue[Any] = queue.Queue()
        self._following = True
        self._stop = threading.Event()
        self._last_poll = 0.0
        self._thread = threading.Thread(target=self._follow, name="k26ctl-journal", daemon=True)
        self._thread.start()

    def _follow(self) -> None:
        iterator: Iterator[Any] | None = None
        try:
            iterator = self._systemd.follow(cursor=self._cursor)
            for entry in iterator:
                if self._stop.is_set():
                    break
                self._queue.put(entry)
        except Exception as exc:  # the stream broke: fall back to polling
            self._queue.put(exc)
        finally:
            self._following = False
            close = getattr(iterator, "close", None)
            if callable(close):
                with suppress(Exception):
                    close()

    def get(self, timeout: float) -> list[Any]:
        """Entries that arrived, waiting up to `timeout` seconds for the first one."""
        entries: list[Any] = []
        if not self._following and self._queue.empty():
            # Polling fallback: one journal read per JOURNAL_POLL_INTERVAL at most.
            wait = self._last_poll + JOURNAL_POLL_INTERVAL - time.monotonic()
            if wait > timeout:
                time.sleep(max(0.0, timeout))
                return entries
            time.sleep(max(0.0, wait))
            return self._poll()
        try:
            item = self._queue.get(timeout=max(0.0, timeout))
        except queue.Empty:
            return entries
        while True:
            if item is _WAKE:
                pass
            elif isinstance(item, BaseException):
                entries.extend(self._poll())
            else:
                entries.append(item)
                self._cursor = getattr(item, "cursor", self._cursor) or self._cursor
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return entries

    def read_now(self) -> list[Any]:
        """The entries after the cursor, read from the journal now rather than waited for."""
        return self._poll()

    def _poll(self) -> list[Any]:
        self._last_poll = time.monotonic()
        try:
            entries = list(self._systemd.journal(cursor=self._cursor))
        except Exception:
            return []
        if entries:
            self._cursor = getattr(entries[-1], "cursor", self._cursor) or self._cursor
        return entries

    def wake(self) -> None:
        """End a get() that is waiting for entries (something else is ready to be looked at)."""
        self._queue.put(_WAKE)

    def stop(self) -> None:
        self._stop.set()


@contextmanager
def _prober(host: Host, profile: Profile) -> Iterator[HttpProber]:
    with host.forward(profile.sglang.local_address, profile.sglang.port) as (address, port):
        prober = HttpProber(address, port, profile)
        try:
            yield prober
        finally:
            prober.close()


def read_unit_state(systemd: Any) -> UnitState:
    return UnitState.from_show(systemd.show(*UNIT_PROPS))


def _eta(elapsed: float, progress: LoadProgress | None, expected: float | None) -> float | None:
    if expected:
        return max(0.0, expected - elapsed)
    if progress is not None and progress.percent > 0:
        return elapsed * (100 - progress.percent) / progress.percent
    return None


def wait_ready(
    host: Host,
    systemd: Any,
    profile: Profile,
    *,
    cursor: str | None,
    baseline: UnitState | None,
    armed: bool,
    probe_first: bool = False,
    expected_load_seconds: float | None = None,
    expected_gpu_memory_mib: int | None = None,
    on_progress: ProgressCallback | None = None,
    on_line: LineCallback | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> ReadinessResult:
    """Block until the server is ready, has failed, or readiness.timeout has passed.

    `expected_gpu_memory_mib` (what the last successful load held) turns GPU memory samples into a
    percentage; samples are taken (nvidia-smi over the same connection) whenever the host has one."""
    start = clock()
    machine = ReadinessMachine(
        start=start,
        timeout=profile.readiness.timeout,
        baseline=baseline,
        armed=armed,
        poll_initial=profile.readiness.poll_initial,
        poll_max=profile.readiness.poll_max,
        expected_load=expected_load_seconds,
    )
    feed = JournalFeed(systemd, cursor)
    next_unit_check = start + min(UNIT_CHECK_INTERVAL, 0.5)
    last_reported: tuple[Any, ...] | None = None
    probes = ThreadPoolExecutor(1, "k26ctl-probe")
    gpu = _GpuSampler(host, expected_gpu_memory_mib)
    try:
        with _prober(host, profile) as prober:
            if probe_first:
                machine.on_probe(prober.probe(), clock())
            # A probe runs in its own thread: a server that hangs on /health must not keep the loop
            # from reading the journal line that says why.
            pending: Future[ProbeResult] | None = None
            while machine.outcome is None:
                now = clock()
                wake = min(machine.next_wakeup(now), next_unit_check)
                if pending is not None:
                    # While the due probe is still running, "due now" would spin this loop: look
                    # back at it once a tick instead (anything else due was handled last pass).
                    wake = now + PENDING_PROBE_TICK if wake <= now else min(wake, now + PENDING_PROBE_TICK)
                for entry in feed.get(wake - now):
                    message = getattr(entry, "message", str(entry))
                    ts = getattr(entry, "timestamp_us", None)
                    machine.on_journal(message, clock(), timestamp_us=ts)
                    if on_line is not None and machine.armed:
                        on_line(message)
                    if machine.outcome is not None:
                        break
                now = clock()
                if machine.outcome is None and now >= next_unit_check:
                    machine.on_unit(read_unit_state(systemd), clock())
                    next_unit_check = clock() + UNIT_CHECK_INTERVAL
                if pending is not None and pending.done():
                    machine.on_probe(_probe_result(pending), clock())
                    pending = None
                if machine.outcome is None and pending is None and machine.probe_due(clock()):
                    pending = probes.submit(prober.probe)
                    pending.add_done_callback(lambda _: feed.wake())  # its answer wakes the loop
                if machine.outcome is None:
                    machine.on_tick(clock())
                if machine.armed:
                    gpu.tick(clock())
                if on_progress is not None:
                    elapsed = clock() - start
                    phase = _phase(machine, gpu.memory)
                    key = (machine.progress, gpu.memory.latest_mib, phase, int(elapsed))
                    if key != last_reported:
                        last_reported = key
                        on_progress(_progress(machine, gpu.memory, phase, elapsed, expected_load_seconds))
        ready = machine.outcome is not None and machine.outcome.kind is OutcomeKind.READY
        if ready:
            gpu.start_final_sample()  # nvidia-smi is slow: it runs while the ready line is read
        if ready and machine.ready_ts_us is None:
            # Ready by probe before the ready line arrived: collect it for the load-time measurement.
            # journald writes an entry at once but wakes its followers in batches (about 0.25 s), so
            # one direct read usually finds it; the follower is the fallback.
            for entry in feed.read_now():
                machine.on_journal(entry.message, clock(), timestamp_us=entry.timestamp_us)
            deadline = clock() + 0.5
            while machine.ready_ts_us is None and clock() < deadline:
                for entry in feed.get(deadline - clock()):
                    machine.on_journal(entry.message, clock(), timestamp_us=entry.timestamp_us)
        if ready:
            gpu.finish_final_sample()
    finally:
        feed.stop()
        # Never wait for a probe still hanging on the server: closing the forward breaks it.
        probes.shutdown(wait=False, cancel_futures=True)
        gpu.close()
    outcome = machine.outcome
    assert outcome is not None
    return ReadinessResult(
        outcome=outcome,
        wall_seconds=outcome.at - start,
        server_load_seconds=machine.server_load_seconds,
        server_stop_seconds=machine.server_stop_seconds,
        reported_load_seconds=machine.reported_load_seconds,
        probes=machine.probes,
        progress=machine.progress,
        last_unit=machine.last_unit,
        gpu_memory_mib=gpu.memory.latest_mib,
    )


def _probe_result(future: Future[ProbeResult]) -> ProbeResult:
    try:
        return future.result()
    except Exception as exc:  # a probe must never end the wait by itself
        return ProbeResult(False, f"probe error: {type(exc).__name__}: {exc}")


def _phase(machine: ReadinessMachine, memory: MemoryProgress) -> str:
    """The journal's load lines mark the phases; rising GPU memory says the weights are loading."""
    if machine.ready_line_seen:
        return "probing"
    if machine.reported_load_seconds is not None:
        return "warming up"
    if machine.progress is not None:
        return "loading weights" if machine.progress.percent < 100 else "warming up"
    if memory.climbing:
        return "loading weights"
    return "starting"


def _progress(
    machine: ReadinessMachine, memory: MemoryProgress, phase: str, elapsed: float, expected: float | None
) -> Progress:
    p = machine.progress
    percent = memory.percent
    if percent is not None and not (p is not None and p.percent < 100):
        # tqdm's record arrives at the end on a real host: the memory says more until then
        eta = memory.eta if phase != "probing" else None
        if phase == "loading weights":
            # Memory is an estimate: a sample can reach the last load's figure just before the line
            # that ends the load arrives (journald wakes readers in batches); that line says "done".
            percent = min(percent, 99)
        return Progress(
            percent,
            p.done if p else None,
            p.total if p else None,
            elapsed,
            eta,
            phase,
            source="gpu-memory",
            gpu_used_gib=_gib(memory.latest_mib),
            gpu_target_gib=_gib(memory.target_mib),
        )
    return Progress(
        p.percent if p else None,
        p.done if p else None,
        p.total if p else None,
        elapsed,
        _eta(elapsed, p, expected),
        phase,
        gpu_used_gib=_gib(memory.latest_mib),
    )


def _gib(mib: int | None) -> float | None:
    return round(mib / 1024, 1) if mib is not None else None


class _GpuSampler:
    """nvidia-smi every SAMPLE_INTERVAL seconds in its own thread (a slow answer must not hold the
    loop); stops for good once the host shows it has no working nvidia-smi."""

    def __init__(self, host: Host, target_mib: int | None) -> None:
        self._host = host
        self.memory = MemoryProgress(target_mib)
        self._pool = ThreadPoolExecutor(1, "k26ctl-gpu")
        self._pending: Future[list[GpuMemory] | None] | None = None
        self._next = 0.0
        self._available = True
        self._final: Future[list[GpuMemory] | None] | None = None

    def tick(self, now: float) -> None:
        if not self._available:
            return
        if self._pending is not None and self._pending.done():
            try:
                sample = self._pending.result()
            except Exception:
                sample = None
            self._pending = None
            if sample is None:
                self._available = False
                return
            self.memory.add(used_mib(sample), now)
        if self._pending is None and now >= self._next:
            self._next = now + SAMPLE_INTERVAL
            self._pending = self._pool.submit(read_gpu_memory, self._host)

    def start_final_sample(self) -> None:
        """What the ready server holds: the figure the next load is measured against. Its own thread:
        a periodic sample may still be running in the pool."""
        if self._available:
            self._final = in_thread(read_gpu_memory, self._host, name="k26ctl-gpu-final")

    def finish_final_sample(self, timeout: float = 30.0) -> None:
        if self._final is None:
            return
        try:
            sample = self._final.result(timeout=timeout)
        except Exception:
            return
        if sample is not None:
            self.memory.add(used_mib(sample), time.monotonic())

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def check_ready_once(host: Host, profile: Profile) -> ProbeResult:
    """One round of the readiness probes (status, no-change deploys)."""
    with _prober(host, profile) as prober:
        return prober.probe()
