"""Where a restart's time went, read from SGLang's own start-up lines in the unit's journal.

`parse_phases(records)` takes the journal records of one restart, oldest first (systemd's `Stopping`
line of the old process, if there is one, through the ready line) and returns the phases in order:

    stop -> imports -> launch -> distributed -> model-setup -> weights -> kv-cache -> init -> graphs
         -> server-start -> warmup -> (ready)

Each phase runs from the line that opens it to the line that opens the next one, so the phases tile
the time from the old process's stop (or the new process's start) to the ready line, and a stacked bar
of them is the whole downtime. A phase SGLang did not log (no CUDA graphs on a CPU, no stop on a
first start) is simply absent. With several tensor-parallel ranks each rank logs its own begin and end
lines: a phase opens at the first rank's begin line and closes at the last rank's end line.

Both release wordings are known (file and line in docs/conformance.md):
- distributed init: `Init torch distributed begin.` / `Init torch distributed ends. elapsed=...` (0.5.15)
  and `Init parallel begin.` / `Init parallel ends. elapsed=...` (0.5.23);
- weights: `Load weight begin. avail mem=...` and `Load weight end. elapsed=..., type=..., avail mem=...,
  mem usage=... GB.` (both), or 0.5.23's `Load weight end. Committed real weights after CUDA graph
  capture in ... s` when the weights load during graph capture;
- KV cache: `KV Cache is allocated. dtype: ..., #tokens: N, K size: ... GB, V size: ... GB` (both);
- graphs: `Capture <role> <decode|prefill|verify> CUDA graph begin.` / `... end. elapsed=...` (both; `CPU
  graph` on a CPU with graphs enabled);
- `server_args=...` once the arguments are parsed (the main process's imports are done; the tokenizer
  and scheduler processes start next);
- uvicorn's `Uvicorn running on ...` before the warm-up request, then
  `The server is fired up and ready to roll!`.

Pure: no I/O. Records are anything with `timestamp_us` and `message` (`remote.systemd.JournalEntry`,
or `LogRecord` below).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

READY_TEXT = "The server is fired up and ready to roll!"

# Phase keys in start-up order, with the words an operator reads.
PHASE_LABELS: dict[str, str] = {
    "stop": "old server stopping",
    "imports": "imports and arguments",
    "launch": "tokenizer and scheduler start",
    "distributed": "distributed init",
    "model-setup": "model setup",
    "weights": "weight loading",
    "kv-cache": "KV cache",
    "init": "backends and scheduler",
    "graphs": "CUDA-graph capture",
    "server-start": "HTTP server start",
    "warmup": "warm-up",
}
PHASE_ORDER = tuple(PHASE_LABELS)


class JournalRecord(Protocol):
    """One journal entry: when journald received it (microseconds since the epoch) and its text."""

    @property
    def timestamp_us(self) -> int: ...

    @property
    def message(self) -> str: ...


@dataclass(frozen=True)
class LogRecord:
    """A journal record as plain data (fixtures, records kept elsewhere)."""

    timestamp_us: int
    message: str


@dataclass(frozen=True)
class Phase:
    name: str  # a key of PHASE_LABELS
    start: float  # seconds from the new process's start (negative: before it, the old one's stop)
    duration: float  # seconds, up to the line that opened the next phase (or the ready line)
    evidence: tuple[str, ...]  # the line that opened the phase, and the one that ended it if logged
    detail: dict[str, Any] = field(default_factory=dict)  # figures the lines carry (bytes, rate, ...)

    @property
    def label(self) -> str:
        return PHASE_LABELS.get(self.name, self.name)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["evidence"] = list(self.evidence)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Phase:
        return cls(
            name=str(data["name"]),
            start=float(data["start"]),
            duration=float(data["duration"]),
            evidence=tuple(str(line) for line in data.get("evidence") or ()),
            detail=dict(data.get("detail") or {}),
        )


@dataclass(frozen=True)
class RestartPhases:
    """One restart, phase by phase. `ready` is False when the records end before the ready line (the
    start failed or is still going): the phases then cover what happened up to the last record."""

    phases: tuple[Phase, ...]
    ready: bool
    wording: str | None  # the release wording the distributed-init lines used: "0.5.15", "0.5.23"
    stop_seconds: float | None  # systemd's `Stopping` of the old process -> `Started` of the new one
    start_seconds: float  # the new process's start -> the ready line (or the last record)
    reported: dict[str, float] = field(default_factory=dict)  # 0.5.23's `Engine startup timings (s)`

    @property
    def downtime_seconds(self) -> float:
        """Stop of the old server -> ready of the new one: the time nothing served."""
        return (self.stop_seconds or 0.0) + self.start_seconds

    def seconds(self, name: str) -> float:
        """Total seconds of one phase (a draft model's second weight load adds to the first)."""
        return sum(p.duration for p in self.phases if p.name == name)

    def find(self, name: str) -> Phase | None:
        return next((p for p in self.phases if p.name == name), None)

    def summary(self) -> str:
        """One line: `weight loading 12.3 s, ...` in order, the largest shares first is the reader's job."""
        parts = [f"{PHASE_LABELS[n]} {self.seconds(n):.1f} s" for n in PHASE_ORDER if self.find(n)]
        return ", ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "phases": [p.to_json() for p in self.phases],
            "ready": self.ready,
            "wording": self.wording,
            "stop_seconds": self.stop_seconds,
            "start_seconds": self.start_seconds,
            "reported": dict(self.reported),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RestartPhases:
        stop = data.get("stop_seconds")
        return cls(
            phases=tuple(Phase.from_json(p) for p in data.get("phases") or ()),
            ready=bool(data.get("ready")),
            wording=data.get("wording"),
            stop_seconds=float(stop) if stop is not None else None,
            start_seconds=float(data.get("start_seconds") or 0.0),
            reported={str(k): float(v) for k, v in (data.get("reported") or {}).items()},
        )


# --- the lines -------------------------------------------------------------------------------------

_NUM = r"(-?[0-9]+(?:\.[0-9]+)?)"
_DIST_BEGIN = re.compile(r"\bInit (torch distributed|parallel) begin\.")
_DIST_END = re.compile(r"\bInit (torch distributed|parallel) ends\. elapsed=" + _NUM + r" s")
_LOAD_BEGIN = re.compile(r"\bLoad weight begin\.")
_LOAD_END = re.compile(
    r"\bLoad weight end\. (?:elapsed=" + _NUM + r" s|Committed real weights.* in " + _NUM + ")"
)
_KV = re.compile(
    r"\bKV Cache is allocated\. dtype: (\S+), #tokens: (\d+), (?:KV size: " + _NUM + r" GB"
    r"|K size: " + _NUM + r" GB, V size: " + _NUM + r" GB)"
)
_MEMORY_POOL_END = re.compile(r"\bMemory pool end\.")
# `{device} graph`: CUDA, CPU, NPU, XPU, ... (a platform's own name by default); the speculative
# workers' own captures say `cuda graph`
_CAPTURE_BEGIN = re.compile(r"\bCapture (.+) \S+ graph begin\.")
_CAPTURE_END = re.compile(r"\bCapture (.+) \S+ graph end\.")
_ARGS = re.compile(r"\] server_args=")
_UVICORN = re.compile(r"\bUvicorn running on ")
_MEM_USAGE = re.compile(r"\bmem usage=" + _NUM + r" GB")
_AVAIL = re.compile(r"\bavail mem=" + _NUM + r" GB")
_ELAPSED = re.compile(r"\belapsed=" + _NUM + r" s")
_TYPE = re.compile(r"\btype=([A-Za-z0-9_]+)")
_BS = re.compile(r"\bbs=(\[[0-9, ]*\])")
_SHARDS = re.compile(
    r"(?:Multi-thread loading shards|Loading safetensors checkpoint shards):\s*\d{1,3}%\s*"
    r"Completed\s*\|\s*(\d+)\s*/\s*(\d+)"
)
# 0.5.23 (entrypoints/engine.py:1118): `Engine startup timings (s): load_weight=0.02, ...,
# cuda_graph={prefill=0.00, decode=0.00, ...}, tokenizer_e2e=30.89`
_TIMINGS = re.compile(r"\bEngine startup timings \(s\): (.*)")
_TIMING = re.compile(r"([a-z_][a-z0-9_]*)=(?:\{([^}]*)\}|" + _NUM + ")")
_STOPPING = re.compile(r"^Stopping \S")
_STOPPED = re.compile(r"^(?:Stopped \S|\S+\.service: Deactivated successfully\.)")
_STARTED = re.compile(r"^Started \S")
# managers/tokenizer_manager.py (0.5.15:3123, 0.5.23:4068): `SIGTERM received. signum=... Draining ...`
_SIGTERM = re.compile(r"\bSIGTERM received\b")
SIGTERM_BEFORE_STOPPING_US = 2_000_000  # how far before `Stopping` SGLang's SIGTERM line still counts
_UNIT_NOTE = re.compile(r"^\S+\.service: ")

GIB = 1 << 30


def _first_line(message: str) -> str:
    """The record's first line, CR-packed tqdm updates reduced to the last one, within 300 characters."""
    line = message.split("\n", 1)[0].rsplit("\r", 1)[-1].strip()
    return line if len(line) <= 300 else line[:297] + "..."


@dataclass
class _Segment:
    name: str
    start_us: int
    evidence: list[str]
    detail: dict[str, Any] = field(default_factory=dict)


class _Builder:
    """Segments in order: a begin line opens its phase unless that phase is already current (another
    rank's copy); an end line moves the boundary to the last rank's end while the next phase has not
    been opened by a line of its own."""

    def __init__(self) -> None:
        self.segments: list[_Segment] = []
        self._end_pending: set[str] = set()  # phases closed by an end line the next one may follow

    @property
    def current(self) -> _Segment | None:
        return self.segments[-1] if self.segments else None

    def open(self, name: str, ts: int, line: str) -> _Segment:
        current = self.current
        if current is not None and current.name == name:
            return current
        if current is not None and self._end_pending == {name} and len(self.segments) > 1:
            # the phase begins again right after it ended (the next CUDA graph after the first):
            # one phase, not a sliver of the next one between them
            self.segments.pop()
            self._end_pending.clear()
            return self.segments[-1]
        segment = _Segment(name, ts, [line])
        self.segments.append(segment)
        self._end_pending.clear()
        return segment

    def close(self, name: str, ts: int, line: str, after: str, *, evidence: bool = True) -> _Segment | None:
        """`name` ended (its end line): the phase `after` starts here. A later rank's end line of the same
        phase moves that boundary forward. Returns the closed segment (None: the phase never opened)."""
        current = self.current
        if current is not None and current.name == after and name in self._end_pending:
            current.start_us = max(current.start_us, ts)
            closed = self._last(name)
            if closed is not None and evidence:
                closed.evidence[1:] = [line]
            return closed
        closed = self._last(name) if current is not None and current.name == name else None
        if closed is not None:
            closed.evidence[1:] = [line]
        self.segments.append(_Segment(after, ts, [line]))
        self._end_pending = {name}
        return closed

    def _last(self, name: str) -> _Segment | None:
        for segment in reversed(self.segments):
            if segment.name == name:
                return segment
        return None


def _float(pattern: re.Pattern[str], line: str) -> float | None:
    m = pattern.search(line)
    return float(m[1]) if m else None


def parse_phases(records: Iterable[JournalRecord]) -> RestartPhases:
    """The phases of one restart from its journal records, oldest first (see the module docstring).
    Records after the ready line are ignored; lines that mark nothing are ignored. The old server's own
    lines before its stop (the last requests it served after the journal cursor was taken) belong to
    no phase."""
    kept: list[tuple[int, str, str]] = []
    ready = False
    for record in records:
        message = record.message or ""
        kept.append((int(record.timestamp_us), _first_line(message), message))
        if READY_TEXT in message:
            ready = True
            break
    if not kept:
        return RestartPhases((), False, None, None, 0.0)
    split = _new_process_index(kept)
    builder = _Builder()
    stop_begin_us = _stop_begin(kept[:split])
    if stop_begin_us is not None:
        evidence = next((line for _, line, _ in kept[:split] if _STOPPING.match(line)), kept[0][1])
        builder.open("stop", stop_begin_us, evidence)
    start_us = kept[split][0] if split < len(kept) else kept[-1][0]
    wording: str | None = None
    shards: tuple[int, int] | None = None
    reported: dict[str, float] = {}
    for index, (ts, line, message) in enumerate(kept[split:]):
        if index == 0:
            builder.open("imports", ts, line)
            continue
        if READY_TEXT in message:
            break
        _mark(builder, ts, line, message)
        m = _DIST_BEGIN.search(line)
        if m:
            wording = "0.5.15" if m[1] == "torch distributed" else "0.5.23"
        m = _TIMINGS.search(line)
        if m:
            reported = _timings(m[1])
        m = _SHARDS.search(message.rsplit("\r", 1)[-1])
        if m:
            shards = (int(m[1]), int(m[2]))
    last_us = kept[-1][0]
    if shards is not None:
        for segment in builder.segments:
            if segment.name == "weights":
                segment.detail.setdefault("shards", shards[1])
    stop_seconds = None if stop_begin_us is None else max(0.0, (start_us - stop_begin_us) / 1e6)
    return RestartPhases(
        phases=_finish(builder.segments, start_us, last_us),
        ready=ready,
        wording=wording,
        stop_seconds=stop_seconds,  # up to the new process's start: all of it was down
        start_seconds=max(0.0, (last_us - start_us) / 1e6),
        reported=reported,
    )


def _new_process_index(kept: Sequence[tuple[int, str, str]]) -> int:
    """Where the new process's records begin: systemd's last `Started` line (a crash loop has several),
    else just after the old process's `Stopped` line, else the first record."""
    started = [i for i, (_, line, _) in enumerate(kept) if _STARTED.match(line)]
    if started:
        return started[-1]
    stopped = [i for i, (_, line, _) in enumerate(kept) if _STOPPED.match(line) or _UNIT_NOTE.match(line)]
    return stopped[-1] + 1 if stopped else 0


def _stop_begin(old: Sequence[tuple[int, str, str]]) -> int | None:
    """When stopping the old process began: systemd's last `Stopping` line, or SGLang's own `SIGTERM
    received` just before it when journald happened to write that first (both come from the same
    moment); without a `Stopping` line, the last SIGTERM line."""
    stopping = [ts for ts, line, _ in old if _STOPPING.match(line)]
    sigterm = [ts for ts, line, _ in old if _SIGTERM.search(line)]
    if stopping:
        near = [ts for ts in sigterm if stopping[-1] - SIGTERM_BEFORE_STOPPING_US <= ts <= stopping[-1]]
        return min([stopping[-1], *near])
    return sigterm[-1] if sigterm else None


def _timings(text: str) -> dict[str, float]:
    """`a=1.00, graph={x=0.50, y=0.00}` -> {"a": 1.0, "graph.x": 0.5, "graph.y": 0.0}."""
    values: dict[str, float] = {}
    for m in _TIMING.finditer(text):
        if m[2] is not None:
            for inner in _TIMING.finditer(m[2]):
                if inner[3] is not None:
                    values[f"{m[1]}.{inner[1]}"] = float(inner[3])
        elif m[3] is not None:
            values[m[1]] = float(m[3])
    return values


def _mark(builder: _Builder, ts: int, line: str, message: str) -> None:
    """Open or close the phase `line` marks, with the figures it carries."""
    if _ARGS.search(line):
        builder.open("launch", ts, line[:120] + "..." if len(line) > 120 else line)
        return
    if _DIST_BEGIN.search(line):
        builder.open("distributed", ts, line)
        return
    m = _DIST_END.search(line)
    if m:
        closed = builder.close("distributed", ts, line, "model-setup")
        if closed is not None:
            closed.detail["reported_seconds"] = float(m[2])
        return
    if _LOAD_BEGIN.search(line):
        segment = builder.open("weights", ts, line)
        avail = _float(_AVAIL, line)
        if avail is not None:
            segment.detail.setdefault("avail_gb_before", avail)
        return
    m = _LOAD_END.search(line)
    if m:
        closed = builder.close("weights", ts, line, "kv-cache")
        if closed is not None:
            _weight_detail(closed.detail, line, m)
        return
    m = _KV.search(line)
    if m:
        closed = builder.close("kv-cache", ts, line, "init")
        if closed is not None:
            size = float(m[3]) if m[3] is not None else float(m[4]) + float(m[5])
            closed.detail.update(dtype=m[1], tokens=int(m[2]), bytes=int(size * GIB))
        return
    if _MEMORY_POOL_END.search(line):
        # logged after the KV line, once the pool is complete: it still belongs to the KV cache
        builder.close("kv-cache", ts, line, "init", evidence=False)
        return
    m = _CAPTURE_BEGIN.search(line)
    if m:
        segment = builder.open("graphs", ts, line)
        captures = segment.detail.setdefault("captures", [])
        if not any(c["name"] == m[1] and "seconds" not in c for c in captures):  # not another rank's
            captures.append({"name": m[1]})
        _capture_bs(captures[-1], line)
        return
    m = _CAPTURE_END.search(line)
    if m:
        closed = builder.close("graphs", ts, line, "server-start")
        if closed is None:
            return
        captures = closed.detail.setdefault("captures", [])
        capture = next((c for c in captures if c["name"] == m[1] and "seconds" not in c), None)
        if capture is None:
            return  # another rank's end of a capture already closed
        elapsed = _float(_ELAPSED, line)
        capture["seconds"] = elapsed if elapsed is not None else round((ts - closed.start_us) / 1e6, 3)
        _capture_bs(capture, line)
        return
    if _UVICORN.search(line):
        builder.open("warmup", ts, line)


def _capture_bs(capture: dict[str, Any], line: str) -> None:
    """The batch sizes captured: 0.5.15 names them in the begin line, 0.5.23 in the end line."""
    bs = _BS.search(line)
    if bs:
        capture["bs"] = [int(b) for b in bs[1].strip("[]").split(",") if b.strip()]


def _weight_detail(detail: dict[str, Any], line: str, m: re.Match[str]) -> None:
    """Each rank logs its own end line: SGLang's seconds are the slowest rank's, the bytes all ranks'."""
    seconds = float(m[1]) if m[1] is not None else float(m[2])
    detail["reported_seconds"] = max(detail.get("reported_seconds", 0.0), seconds)
    model_type = _TYPE.search(line)
    if model_type:
        detail["type"] = model_type[1]
    usage = _float(_MEM_USAGE, line)
    if usage is not None and usage > 0:
        # SGLang logs the memory the weights took (each rank its shard; on a CPU the drop in the host's
        # available memory, so other processes blur it), not bytes read from disk; 0 logs no size
        detail["bytes"] = detail.get("bytes", 0) + int(usage * GIB)


def _finish(segments: Sequence[_Segment], start_us: int, end_us: int) -> tuple[Phase, ...]:
    phases: list[Phase] = []
    for index, segment in enumerate(segments):
        stop = segments[index + 1].start_us if index + 1 < len(segments) else end_us
        seconds = (stop - segment.start_us) / 1e6
        if segment.name == "weights" and segment.detail.get("bytes") and seconds > 0:
            segment.detail["rate_gb_s"] = round(segment.detail["bytes"] / GIB / seconds, 3)
        phases.append(
            Phase(
                name=segment.name,
                start=round((segment.start_us - start_us) / 1e6, 3),
                duration=round(max(0.0, (stop - segment.start_us) / 1e6), 3),
                evidence=tuple(segment.evidence),
                detail=dict(segment.detail),
            )
        )
    return tuple(phases)
