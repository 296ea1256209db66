"""The step log behind the recap: each pipeline step ends ok, changed, failed or skipped."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from k26ctl.deploy.model import DeployEvent, EventCallback, StepResult
from k26ctl.errors import interrupt_behind


@dataclass
class StepHandle:
    status: str = "ok"
    detail: str = ""

    def changed(self, detail: str = "") -> None:
        self.status, self.detail = "changed", detail or self.detail

    def ok(self, detail: str = "") -> None:
        self.status, self.detail = "ok", detail or self.detail

    def failed(self, detail: str = "") -> None:
        self.status, self.detail = "failed", detail or self.detail

    def skipped(self, detail: str = "") -> None:
        self.status, self.detail = "skipped", detail or self.detail


class StepLog:
    def __init__(self, on_event: EventCallback | None) -> None:
        self.steps: list[StepResult] = []
        self._on_event = on_event

    def emit(self, kind: str, message: str, **data: object) -> None:
        if self._on_event is not None:
            self._on_event(DeployEvent(kind, message, dict(data)))

    def add(self, name: str, status: str, detail: str = "", seconds: float = 0.0) -> None:
        result = StepResult(name, status, detail, seconds)
        self.steps.append(result)
        self.emit("step", f"{name}: {status}{' - ' + detail if detail else ''}", **result.__dict__)

    @contextmanager
    def step(self, name: str, message: str = "") -> Iterator[StepHandle]:
        handle = StepHandle()
        self.emit("phase", message or name, name=name)
        start = time.monotonic()
        try:
            yield handle
        except BaseException as exc:
            text = getattr(exc, "message", None) or str(exc) or type(exc).__name__
            if interrupt_behind(exc):
                text = "interrupted"
            self.add(name, "failed", handle.detail or text, time.monotonic() - start)
            raise
        self.add(name, handle.status, handle.detail, time.monotonic() - start)
