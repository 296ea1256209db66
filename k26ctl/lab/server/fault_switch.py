"""A lab-only runtime fault switch: turn the verify fault or the mask bug on and off in a running server.

SGLang has nothing like it; the lab uses it to change a serving server without a deploy or a restart,
the way a weight swap, a driver update or a failing GPU would, and to see `k26ctl watch` notice. It is
a file, not an endpoint: the server is started with K26LAB_FAULT_SWITCH=PATH and re-reads PATH (when its
modification time or size changes, polled every 0.2 s). Only whoever can write that file (on the lab
host, inside its namespace) can flip it; nothing is exposed on the network.

The file holds JSON: `{"verify_fault": "none" | "second-request" | "tool-arguments", "mask_bug": true |
false}` (both keys optional). A missing file means the settings the server started with. `mask_bug:
true` makes the target attention backend size its verify mask from the draft block size again (what the
unpatched SGLang line does), which corrupts every DDTree verify pass whose width exceeds the block. A
change takes effect at the next scheduler step, never inside one.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from k26ctl.lab.server.numerics import VERIFY_FAULTS

ENV = "K26LAB_FAULT_SWITCH"
POLL_S = 0.2


@dataclass(frozen=True)
class RuntimeFaults:
    verify_fault: str | None = None  # None: as started
    mask_bug: bool = False

    @classmethod
    def parse(cls, text: str) -> RuntimeFaults:
        data = json.loads(text) if text.strip() else {}
        if not isinstance(data, dict):
            raise ValueError("the fault switch file must hold a JSON object")
        unknown = set(data) - {"verify_fault", "mask_bug"}
        if unknown:
            raise ValueError(f"unknown keys {sorted(unknown)} (known: verify_fault, mask_bug)")
        fault = data.get("verify_fault")
        if fault is not None and fault not in VERIFY_FAULTS:
            raise ValueError(f"verify_fault must be one of {VERIFY_FAULTS}, got {fault!r}")
        mask_bug = data.get("mask_bug", False)
        if not isinstance(mask_bug, bool):
            raise ValueError("mask_bug must be true or false")
        return cls(fault, mask_bug)

    def to_json(self) -> dict[str, Any]:
        return {"verify_fault": self.verify_fault, "mask_bug": self.mask_bug}


def write_switch(path: Path, faults: RuntimeFaults) -> None:
    """Write the switch file atomically (what tests and benchmarks call)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(faults.to_json()), encoding="utf-8")
    os.replace(tmp, path)


class FaultSwitch:
    """Polls the switch file and hands every new setting to `apply` (the engine's, at a step boundary)."""

    def __init__(self, path: Path, apply: Callable[[RuntimeFaults], None], log: Callable[[str], None]):
        self.path = path
        self._apply = apply
        self._log = log
        self._seen: tuple[int, int] | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lab-fault-switch", daemon=True)

    def start(self) -> None:
        self._log(f"Lab fault switch: watching {self.path} (lab only)")
        self.poll()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(POLL_S):
            self.poll()

    def poll(self) -> None:
        try:
            st = self.path.stat()
            stamp: tuple[int, int] | None = (st.st_mtime_ns, st.st_size)
        except FileNotFoundError:
            stamp = None
        if stamp == self._seen:
            return
        self._seen = stamp
        try:
            faults = RuntimeFaults() if stamp is None else RuntimeFaults.parse(self.path.read_text("utf-8"))
        except (OSError, ValueError) as exc:
            self._log(f"Lab fault switch: ignoring {self.path}: {exc}")
            return
        self._apply(faults)
        self._log(f"Lab fault switch: {json.dumps(faults.to_json())}")
