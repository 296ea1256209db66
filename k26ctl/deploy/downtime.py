"""Downtime told before it happens: the stop -> ready time this host's history predicts for the next
restart, under the conditions it will start in (JIT caches warm or cold, weights in the page cache or
not), with the range seen and what the figure rests on.

Pure: records in, an Expectation out. Restarts on this host whose conditions match are the basis; with
none matching, every recorded restart is, and the basis says so.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from k26ctl.deploy.history import DeployRecord

WEIGHTS_CACHED = 0.9  # resident share from which weights count as cached


@dataclass(frozen=True)
class Conditions:
    """What the next start can reuse. None: not known."""

    jit_cache: str | None = None  # "warm" | "cold"
    weights_cached: bool | None = None
    weights_bytes: int | None = None  # the size of the weights the start reads (another model: not alike)

    def words(self) -> str:
        parts = []
        if self.jit_cache:
            parts.append(f"{self.jit_cache} JIT caches")
        if self.weights_cached is not None:
            parts.append("weights in the page cache" if self.weights_cached else "weights not cached")
        return ", ".join(parts) or "conditions unknown"

    @classmethod
    def from_record(cls, data: dict[str, Any] | None) -> Conditions:
        data = data or {}
        resident = data.get("weights_resident")
        size = data.get("weights_bytes")
        return cls(
            jit_cache=data.get("jit_cache") if data.get("jit_cache") in ("warm", "cold") else None,
            weights_cached=None if resident is None else float(resident) >= WEIGHTS_CACHED,
            weights_bytes=int(size) if isinstance(size, (int, float)) and size > 0 else None,
        )


@dataclass(frozen=True)
class Expectation:
    seconds: float  # the median stop -> ready of the basis
    low: float
    high: float
    samples: int
    conditions: Conditions
    matched: bool  # the basis are restarts under the same conditions (False: all restarts)
    weights_seconds: float | None = None  # the median weight-loading phase of the basis

    def basis(self) -> str:
        which = f"under the same conditions ({self.conditions.words()})" if self.matched else "of any kind"
        return f"{self.samples} earlier restart{'s' if self.samples != 1 else ''} on this host {which}"

    def line(self) -> str:
        spread = f", seen {self.low:.0f}-{self.high:.0f} s" if self.samples > 1 else ""
        weights = f"; weights {self.weights_seconds:.0f} s of it" if self.weights_seconds is not None else ""
        return f"expected downtime (stop -> ready) {self.seconds:.0f} s{spread}{weights}; from {self.basis()}"

    def to_json(self) -> dict[str, Any]:
        return {
            "seconds": round(self.seconds, 1),
            "low": round(self.low, 1),
            "high": round(self.high, 1),
            "samples": self.samples,
            "matched": self.matched,
            "jit_cache": self.conditions.jit_cache,
            "weights_cached": self.conditions.weights_cached,
            "weights_seconds": None if self.weights_seconds is None else round(self.weights_seconds, 1),
            "basis": self.basis(),
        }


def _restarts(records: Sequence[DeployRecord]) -> list[DeployRecord]:
    return [r for r in records if r.restarted and r.phases and r.phases.get("ready")]


def _downtime(record: DeployRecord) -> float:
    from k26ctl.deploy.phases import RestartPhases

    assert record.phases is not None
    return RestartPhases.from_json(record.phases).downtime_seconds


def _weights(record: DeployRecord) -> float:
    from k26ctl.deploy.phases import RestartPhases

    assert record.phases is not None
    return RestartPhases.from_json(record.phases).seconds("weights")


def _matches(record: DeployRecord, want: Conditions) -> bool:
    seen = Conditions.from_record(record.start_conditions)
    if want.jit_cache is not None and seen.jit_cache != want.jit_cache:
        return False
    if want.weights_bytes and seen.weights_bytes and abs(seen.weights_bytes / want.weights_bytes - 1) > 0.1:
        return False  # another checkpoint: its load says little about this one
    return want.weights_cached is None or seen.weights_cached == want.weights_cached


def expect_downtime(records: Sequence[DeployRecord], conditions: Conditions) -> Expectation | None:
    """None when the host has no recorded restart with its phases."""
    restarts = _restarts(records)
    if not restarts:
        return None
    same = [r for r in restarts if _matches(r, conditions)]
    basis = same or restarts
    times = [_downtime(r) for r in basis]
    return Expectation(
        seconds=statistics.median(times),
        low=min(times),
        high=max(times),
        samples=len(times),
        conditions=conditions,
        matched=bool(same),
        weights_seconds=statistics.median(_weights(r) for r in basis),
    )
