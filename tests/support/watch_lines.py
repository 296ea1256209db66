"""A running `k26ctl watch --json`'s records, read by a thread as they come."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
from typing import Any


class WatchLines:
    """The watcher's JSON lines, read by a thread as they come."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.queue: queue.Queue[tuple[float, dict[str, Any]]] = queue.Queue()  # (arrival, record)
        self.seen: list[dict[str, Any]] = []
        assert proc.stdout is not None
        stdout = proc.stdout

        def pump() -> None:
            for line in stdout:
                if line.strip():
                    self.queue.put((time.monotonic(), json.loads(line)))

        threading.Thread(target=pump, daemon=True).start()

    def until(
        self, state: str, timeout: float = 180.0, *, after: float | None = None
    ) -> tuple[dict[str, Any], int]:
        """The first record in `state` from now on, and how many steps (records) it took. With `after`
        (a time.monotonic() value), records that came before it are passed over: a test that waited
        on something else meanwhile (Prometheus) must not count the records that piled up then."""
        deadline = time.monotonic() + timeout
        steps = 0
        while time.monotonic() < deadline:
            try:
                arrived, record = self.queue.get(timeout=1.0)
            except queue.Empty:
                continue
            self.seen.append(record)
            if after is not None and arrived < after:
                continue
            steps += 1
            if record.get("state") == state:
                return record, steps
        raise AssertionError(f"no {state!r} record within {timeout} s; last: {self.seen[-3:]}")
