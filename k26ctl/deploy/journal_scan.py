"""Reading a server's journal as it starts: load progress, the ready line, and fatal errors.

Pure functions over message text, so the rules are tested on real SGLang-style lines without a host.
A traceback alone is not fatal (SGLang logs warnings with stack traces and carries on); it becomes the
evidence once the main process exits. SGLang's own failure lines are fatal at once, because after a
scheduler subprocess dies the server can sit idle until its watchdog fires minutes later.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field

READY_TEXT = "The server is fired up and ready to roll!"

# tqdm's bar (BAR_FORMAT in srt/utils/common.py) for both loaders in model_loader/weight_utils.py:
# the default multi-thread one and the single-thread iterator. On a real host it reaches the journal
# as ONE record at the end (the updates are joined by carriage returns), so it marks a phase more
# than it shows progress.
_PROGRESS_RE = re.compile(
    r"(?:Multi-thread loading shards|Loading safetensors checkpoint shards):\s*(?P<pct>\d{1,3})%\s*Completed"
    r"\s*\|\s*(?P<done>\d+)\s*/\s*(?P<total>\d+)"
)
_LOAD_END_RE = re.compile(r"Load weight end\.\s*elapsed=(?P<secs>[0-9.]+)\s*s")

# SGLang's failure lines, each a text that exists verbatim in 0.5.15 and 0.5.23 (tests/conformance
# checks them against the release sources).
_FATAL_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    # managers/scheduler.py, tokenizer_manager.py, detokenizer_manager.py, data_parallel_controller.py
    ("subprocess-exception", re.compile(r"\b[A-Za-z]+ hit an exception\b")),
    # entrypoints/engine.py: the launch-phase SIGQUIT handler
    ("sigquit-from-child", re.compile(r"Received sigquit from a child process")),
    # managers/tokenizer_manager.py: the running-phase handler, once the tokenizer loop has started
    ("sigquit-child-failed", re.compile(r"SIGQUIT received\..*It usually means one child failed\.")),
    # entrypoints/engine.py: `Rank N scheduler died during initialization (exit code: C)`
    ("scheduler-died", re.compile(r"scheduler died during initialization")),
    # utils/watchdog.py, after the schedulers report ready
    ("subprocess-crashed", re.compile(r"Subprocess \S+ \(pid=\d+\) crashed with exit code")),
    # utils/watchdog.py: a hard watchdog (soft=False) kills the server 5 s later
    ("watchdog-timeout", re.compile(r"watchdog timeout \(self\.watchdog_timeout=[^,]*, self\.soft=False\)")),
    # entrypoints/engine.py, managers/data_parallel_controller.py
    ("terminated", re.compile(r"\bterminated with -?[1-9]\d*\b")),
    # entrypoints/http_server.py (warmup) and entrypoints/engine.py
    ("initialization-failed", re.compile(r"\bInitialization failed\b")),
)

# systemd's own lines about the unit (they reach `journalctl -u` with the unit's other lines).
_MAIN_EXITED_RE = re.compile(r"Main process exited, code=(?P<code>\w+), status=(?P<status>\S+)")
_FAILED_RESULT_RE = re.compile(r"Failed with result '(?P<result>[^']+)'")
_RESTART_RE = re.compile(r"Scheduled restart job, restart counter is at (?P<n>\d+)")
_STARTED_RE = re.compile(r"^(?:Started|Starting) \S")
_STOPPING_RE = re.compile(r"^Stopping \S")
_STOPPED_RE = re.compile(r"^Stopped \S")

_TRACEBACK_START = "Traceback (most recent call last):"
_CHAIN_LINES = (
    "The above exception was the direct cause of the following exception:",
    "During handling of the above exception, another exception occurred:",
)


@dataclass(frozen=True)
class LoadProgress:
    percent: int
    done: int
    total: int


def parse_progress(message: str) -> LoadProgress | None:
    """The last shard-progress figure in a line (tqdm may pack several updates split by CR)."""
    matches = list(_PROGRESS_RE.finditer(message))
    if not matches:
        return None
    m = matches[-1]
    return LoadProgress(min(int(m["pct"]), 100), int(m["done"]), int(m["total"]))


def parse_load_seconds(message: str) -> float | None:
    """Weight-load time as SGLang reports it in `Load weight end. elapsed=... s`."""
    m = _LOAD_END_RE.search(message)
    return float(m["secs"]) if m else None


def is_ready_line(message: str) -> bool:
    return READY_TEXT in message


def stop_phase(message: str) -> str | None:
    """'stopping' or 'stopped' for systemd's lines around stopping the old process."""
    if _STOPPING_RE.match(message):
        return "stopping"
    if _STOPPED_RE.match(message):
        return "stopped"
    return None


def fatal_pattern(message: str) -> str | None:
    """Name of the SGLang failure pattern the line matches, if any."""
    for name, pattern in _FATAL_PATTERNS:
        if pattern.search(message):
            return name
    return None


class Signal(str, enum.Enum):
    NONE = "none"
    STARTED = "started"  # systemd starts the (new) main process
    PROGRESS = "progress"
    LOAD_END = "load-end"
    READY = "ready"
    FATAL = "fatal"  # SGLang's own failure line: fail now
    PROCESS_EXIT = "process-exit"  # systemd: main process exited
    UNIT_FAILED = "unit-failed"  # systemd: failed with result ...
    RESTART = "restart"  # systemd: scheduled restart


@dataclass(frozen=True)
class ScanEvent:
    signal: Signal
    message: str
    progress: LoadProgress | None = None
    load_seconds: float | None = None
    detail: str = ""


def _strip_prefix(message: str) -> str:
    """Drop an SGLang log prefix such as `[2026-11-29 10:00:00 TP0] `."""
    if message.startswith("[") and "] " in message:
        return message.split("] ", 1)[1]
    return message


def classify(message: str) -> ScanEvent:
    """One line, without context: which signal it carries."""
    if is_ready_line(message):
        return ScanEvent(Signal.READY, message)
    progress = parse_progress(message)
    if progress is not None:
        return ScanEvent(Signal.PROGRESS, message, progress=progress)
    secs = parse_load_seconds(message)
    if secs is not None:
        return ScanEvent(Signal.LOAD_END, message, load_seconds=secs)
    name = fatal_pattern(message)
    if name is not None:
        return ScanEvent(Signal.FATAL, message, detail=name)
    m = _MAIN_EXITED_RE.search(message)
    if m:
        return ScanEvent(Signal.PROCESS_EXIT, message, detail=f"code={m['code']}, status={m['status']}")
    m = _FAILED_RESULT_RE.search(message)
    if m:
        return ScanEvent(Signal.UNIT_FAILED, message, detail=m["result"])
    m = _RESTART_RE.search(message)
    if m:
        return ScanEvent(Signal.RESTART, message, detail=f"restart counter {m['n']}")
    if _STARTED_RE.match(message):
        return ScanEvent(Signal.STARTED, message)
    return ScanEvent(Signal.NONE, message)


@dataclass
class JournalScanner:
    """Feeds journal lines in order; remembers the last traceback and the lines worth showing.

    `evidence()` gives what an operator needs to see when the start fails: the SGLang failure lines,
    the last complete traceback (frames trimmed), and systemd's exit lines; otherwise the tail.
    """

    max_tail: int = 30
    max_traceback_lines: int = 24
    tail: list[str] = field(default_factory=list)
    fatal_lines: list[str] = field(default_factory=list)
    exit_lines: list[str] = field(default_factory=list)
    last_traceback: list[str] = field(default_factory=list)
    _current_tb: list[str] | None = None

    def feed(self, message: str) -> ScanEvent:
        for part in message.splitlines() or [""]:
            self._track_traceback(part)
        self.tail.append(message)
        if len(self.tail) > self.max_tail:
            del self.tail[0]
        event = classify(message)
        if event.signal is Signal.FATAL:
            self.fatal_lines.append(message)
        elif event.signal in (Signal.PROCESS_EXIT, Signal.UNIT_FAILED, Signal.RESTART):
            self.exit_lines.append(message)
        return event

    def _track_traceback(self, line: str) -> None:
        if _TRACEBACK_START in line:
            if self._current_tb is not None and self._current_tb_is_chained():
                self._current_tb.append(line)
            else:
                self._current_tb = [line]
            return
        if self._current_tb is None:
            return
        stripped = line.strip()
        if line.startswith((" ", "\t")) or stripped in _CHAIN_LINES or not stripped:
            self._current_tb.append(line)
            return
        # First unindented line after the frames: the exception line closes the block.
        self._current_tb.append(line)
        self.last_traceback = self._trim(self._current_tb)
        self._current_tb = None

    @property
    def in_traceback(self) -> bool:
        """True while a traceback block is open (its exception line has not arrived yet)."""
        return self._current_tb is not None

    def _current_tb_is_chained(self) -> bool:
        tb = self._current_tb or []
        return any(line.strip() in _CHAIN_LINES for line in tb[-2:])

    def _trim(self, block: list[str]) -> list[str]:
        block = [line for line in block if line.strip()]
        if len(block) <= self.max_traceback_lines:
            return block
        keep_tail = self.max_traceback_lines - 2
        skipped = len(block) - 1 - keep_tail
        return [block[0], f"  ... ({skipped} lines)", *block[-keep_tail:]]

    def evidence(self, *, include_traceback: bool = True) -> list[str]:
        lines: list[str] = []
        if include_traceback and self.last_traceback:
            lines.extend(self.last_traceback)
        for line in self.fatal_lines:
            first = line.splitlines()[0] if line else line
            if first not in lines:
                lines.append(first)
        if not lines:
            # No traceback and no known failure line: the process's own last words say most.
            lines = [line for line in self.tail if line not in self.exit_lines][-8:]
        lines.extend(line for line in self.exit_lines if line not in lines)
        return lines
