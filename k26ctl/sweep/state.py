"""A persisted sweep: one JSON file for what is searched, one JSON Lines file with a record per point.

    $XDG_STATE_HOME/k26ctl/sweep/<name>.json        the spec (plus the captured live deployment)
    $XDG_STATE_HOME/k26ctl/sweep/<name>.log.jsonl   appended and fsynced after every point:
        {"event": "start", "number": n, "assignment": {...}, "role": ...}   before the deploy
        {"event": "point", "number": n, "assignment": {...}, "coherent": ..., "levels": [...], ...}

The conventions are the shared session core's (k26ctl.search.session): a start without its point
record was interrupted and is measured again; a measured point is never measured again; a torn last
line is ignored.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from k26ctl.search.assignment import Assignment
from k26ctl.search.session import SearchSession, SessionKind
from k26ctl.statefile import Records
from k26ctl.sweep.load import LevelResult
from k26ctl.sweep.search import Evaluation
from k26ctl.sweep.shapes import PointShape, SweepFileShape, log_record_shape
from k26ctl.sweep.space import Param, point_id

SWEEP = SessionKind("sweep", "sweep", "sweep", "k26ctl sweep PROFILE --param KEY=SPEC")


@dataclass
class Objective:
    concurrency: int
    max_ttft_p99_ms: float | None = None
    max_itl_p99_ms: float | None = None

    def describe(self) -> str:
        limits = [
            f"p99 {name} <= {value:g} ms"
            for name, value in (("TTFT", self.max_ttft_p99_ms), ("ITL", self.max_itl_p99_ms))
            if value is not None
        ]
        tail = f" under {' and '.join(limits)}" if limits else ""
        return f"output tokens/s at concurrency {self.concurrency}{tail}"


@dataclass
class SweepSpec:
    profile: str
    params: list[dict[str, Any]]
    concurrency: list[int]
    objective: dict[str, Any]
    sets: list[str] = field(default_factory=list)
    max_restarts: int = 12
    rounds: int = 2
    requests_per_level: int = 16
    max_new_tokens: int = 128
    template: str = "chatml"
    controls: bool = True
    original: dict[str, Any] | None = None  # what was live before the sweep (for reset)
    created: float = field(default_factory=time.time)

    def param_list(self) -> list[Param]:
        return [Param.from_json(p) for p in self.params]

    def objective_obj(self) -> Objective:
        return Objective(**self.objective)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SweepSpec:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


@dataclass
class PointRecord:
    number: int
    assignment: Assignment
    role: str  # control | default | search
    label: str
    up: bool  # deployed and answering
    coherent: bool  # up and smoke passed
    restarted: bool
    seconds: float
    detail: str
    levels: list[LevelResult] = field(default_factory=list)
    phases: dict[str, Any] | None = None  # the deploy's restart phases (deploy.phases JSON)

    def level(self, concurrency: int) -> LevelResult | None:
        return next((lv for lv in self.levels if lv.concurrency == concurrency), None)

    def evaluation(self, objective: Objective) -> Evaluation:
        level = self.level(objective.concurrency)
        if not self.coherent or level is None or level.requests == level.errors:
            return Evaluation(self.coherent and level is not None, None)
        feasible = _within(level.ttft_p99_ms, objective.max_ttft_p99_ms) and _within(
            level.itl_p99_ms, objective.max_itl_p99_ms
        )
        return Evaluation(True, level.output_tokens_per_s, feasible)

    def to_json(self) -> dict[str, Any]:
        levels = [lv.to_json() for lv in self.levels]
        fields = {**asdict(self), "seconds": round(self.seconds, 3), "levels": levels}
        return {"event": "point", **fields, "time": time.time()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PointRecord:
        """A point record as `to_json` writes it; pydantic's ValidationError names a wrong field."""
        return cls.from_shape(PointShape.model_validate(data))

    @classmethod
    def from_shape(cls, shape: PointShape) -> PointRecord:
        plain = {name: getattr(shape, name) for name in cls.__dataclass_fields__ if name != "levels"}
        return cls(**plain, levels=[LevelResult(**level.model_dump()) for level in shape.levels])


def _within(value: float | None, limit: float | None) -> bool:
    return limit is None or (value is not None and value <= limit)


class SweepSession(SearchSession):
    kind = SWEEP

    def create(self, spec: SweepSpec) -> None:
        self.write_new({"spec": spec.to_json()})

    def spec(self) -> SweepSpec:
        from k26ctl import inputs

        document = self.read_document(SweepFileShape, max_bytes=inputs.MAX_PROFILE_BYTES)
        return SweepSpec.from_json(document.spec.model_dump())

    # ---- records ---------------------------------------------------------------------------------

    def record_start(self, number: int, assignment: Assignment, role: str) -> None:
        self.append(
            {"event": "start", "number": number, "assignment": assignment, "role": role, "time": time.time()}
        )

    def record_point(self, record: PointRecord) -> None:
        self.append(record.to_json())

    def read_points(self) -> Records[PointRecord]:
        """Measured points that read, in order (a point recorded twice keeps its first record), and a
        problem for each record that does not."""
        return self.judged(
            log_record_shape, PointShape, PointRecord.from_shape, lambda point: point_id(point.assignment)
        )

    def points(self) -> list[PointRecord]:
        """The measured points; any unreadable record is a BadStateError (a sweep never resumes past it)."""
        return self.all_readable(self.read_points())

    def interrupted(self) -> dict[str, Any] | None:
        """The last start record without its point record, if any."""
        return self.unfinished_start("point", "number")


def by_id(points: Sequence[PointRecord]) -> dict[str, PointRecord]:
    return {point_id(p.assignment): p for p in points}
