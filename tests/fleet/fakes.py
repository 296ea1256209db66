"""In-process stand-ins for the router and the member hosts, for the roll's logic only."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from k26ctl.fleet.roll import ApplyOutcome
from k26ctl.fleet.router import RouterError, Worker


class FakeRouter:
    """The 0.3.x admin semantics that matter to the roll: UUIDs per registration, an unhealthy worker is
    listed but not healthy, a restart forgets every worker. `log` records every change in order."""

    def __init__(self) -> None:
        self.listed: dict[str, Worker] = {}
        self.health: dict[str, bool] = {}  # url -> answers /health 200
        self.log: list[tuple[str, str]] = []
        self._ids = itertools.count(1)
        self.on_add: Callable[[str], object] | None = None  # called with each added url, result unused
        self.settings: dict[str, dict[str, Any]] = {}  # url -> settings given at its last add

    def workers(self) -> list[Worker]:
        return [Worker(w.id, w.url, self.health.get(w.url, True)) for w in self.listed.values()]

    def add(self, url: str, *, timeout: float = 60.0, settings: dict[str, Any] | None = None) -> Worker:
        self.log.append(("add", url))
        self.settings[url] = dict(settings or {})
        if self.on_add:
            self.on_add(url)
        if not self.health.get(url, True):
            raise RouterError(f"{url} listed but not healthy {timeout:g} s after POST /workers")
        worker = self.listed.get(url) or Worker(f"id-{next(self._ids)}", url, True)
        self.listed[url] = worker
        return worker

    def remove(self, url: str, *, timeout: float = 10.0) -> bool:
        self.log.append(("remove", url))
        return self.listed.pop(url, None) is not None

    def take_out(self, url: str, *, timeout: float = 10.0, settle: float = 0.0) -> dict[str, Any] | None:
        return {} if self.remove(url, timeout=timeout) else None

    def in_flight(self, url: str) -> int | None:
        return None  # 0.3.x forgets a worker at DELETE

    def restart(self) -> None:
        self.listed.clear()


class FakeSmg(FakeRouter):
    """SMG's drain window as the roll sees it: a worker taken out stays listed as draining with the
    count of its running requests (`counts`, one read each), then leaves at the next remove."""

    def __init__(self, counts: list[int] | None = None) -> None:
        super().__init__()
        self.counts = counts if counts is not None else [2, 1, 0, 0]
        self.draining: dict[str, Worker] = {}
        self.kept: dict[str, dict[str, Any]] = {}  # url -> settings take_out returns

    def workers(self) -> list[Worker]:
        return super().workers() + list(self.draining.values())

    def take_out(self, url: str, *, timeout: float = 10.0, settle: float = 0.0) -> dict[str, Any] | None:
        self.log.append(("take_out", url))
        worker = self.listed.pop(url, None)
        if worker is None:
            return None
        self.draining[url] = Worker(worker.id, url, False, status="draining")
        return dict(self.kept.get(url, {}))

    def in_flight(self, url: str) -> int | None:
        if url not in self.draining:
            return None
        self.log.append(("in_flight", url))
        return self.counts.pop(0) if len(self.counts) > 1 else self.counts[0]

    def remove(self, url: str, *, timeout: float = 10.0) -> bool:
        gone = self.draining.pop(url, None) is not None
        return super().remove(url, timeout=timeout) or gone


@dataclass
class FakeMember:
    name: str
    url: str
    fingerprint: str = "target"
    changes: bool = True
    smoke_ok: bool = True
    loads: list[int] = field(default_factory=lambda: [2, 1, 0, 0])
    router: FakeRouter | None = None
    during_apply: Callable[[], None] | None = None
    calls: list[str] = field(default_factory=list)
    notes: list[dict[str, Any]] = field(default_factory=list)
    listed_while_applying: bool | None = None

    def pending(self) -> bool:
        self.calls.append("pending")
        return self.changes

    def load(self) -> int | None:
        self.calls.append("load")
        return self.loads.pop(0) if len(self.loads) > 1 else self.loads[0]

    def apply(self) -> ApplyOutcome:
        self.calls.append("apply")
        if self.router is not None:
            self.listed_while_applying = self.url in self.router.listed
        if self.during_apply:
            self.during_apply()
        self.changes = False
        if not self.smoke_ok:
            return ApplyOutcome(False, "new", "smoke: '!!!!' run in 3 of 8 answers")
        return ApplyOutcome(True, "new", "deployed, smoke passed")

    def note(self, entry: dict[str, Any]) -> None:
        self.notes.append(entry)

    def close(self) -> None:
        pass
