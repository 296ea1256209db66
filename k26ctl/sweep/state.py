"""A persisted sweep: one JSON file for what is searched, one JSON Lines file with a record per point.

    $XDG_STATE_HOME/k26ctl/sweep/<name>.json        the spec (plus the captured live deployment)
    $XDG_STATE_HOME/k26ctl/sweep/<name>.log.jsonl   appended and fsynced after every point:
        {"event": "start", "number": n, "assignment": {...}, "role": ...}   before the deploy
        {"event": "point", "number": n, "assignment": {...}, "coherent": ..., "levels": [...], ...}

The same conventions as bisect-config's sessions: a start without its point record was interrupted
and is measured again; a measured point is never measured again (the planner looks every point up by
its canonical assignment); a torn last line is ignored.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from k26ctl.bisect.eventlog import EventLog, exclusive, first_wins
from k26ctl.bisect.plan import Assignment
from k26ctl.bisect.session import SESSION_NAME, _write_json_atomic
from k26ctl.errors import K26Error, UsageError
from k26ctl.statedir import ensure_dir
from k26ctl.statefile import Records
from k26ctl.sweep.load import LevelResult
from k26ctl.sweep.search import Evaluation
from k26ctl.sweep.shapes import PointShape, SweepFileShape, log_record_shape
from k26ctl.sweep.space import Param, point_id

DEFAULT_SESSION = "default"


def state_dir() -> Path:
    from k26ctl.statedir import state_root

    return state_root() / "k26ctl" / "sweep"


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
        return {
            "event": "point",
            "number": self.number,
            "assignment": self.assignment,
            "role": self.role,
            "label": self.label,
            "up": self.up,
            "coherent": self.coherent,
            "restarted": self.restarted,
            "seconds": round(self.seconds, 3),
            "detail": self.detail,
            "levels": [lv.to_json() for lv in self.levels],
            "phases": self.phases,
            "time": time.time(),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PointRecord:
        """A point record as `to_json` writes it; pydantic's ValidationError names a wrong field."""
        return cls.from_shape(PointShape.model_validate(data))

    @classmethod
    def from_shape(cls, shape: PointShape) -> PointRecord:
        return cls(
            number=shape.number,
            assignment=shape.assignment,
            role=shape.role,
            label=shape.label,
            up=shape.up,
            coherent=shape.coherent,
            restarted=shape.restarted,
            seconds=shape.seconds,
            detail=shape.detail,
            levels=[LevelResult(**level.model_dump()) for level in shape.levels],
            phases=shape.phases,
        )


def _within(value: float | None, limit: float | None) -> bool:
    return limit is None or (value is not None and value <= limit)


class SweepLocked(K26Error):
    exit_code = 1


class SweepSession:
    def __init__(self, name: str, directory: Path | None = None) -> None:
        if not SESSION_NAME.match(name):
            raise UsageError(f"bad session name {name!r}", "letters, digits, '.', '_' and '-' only")
        self.name = name
        self.directory = directory or state_dir()
        self.spec_path = self.directory / f"{name}.json"
        self.log_path = self.directory / f"{name}.log.jsonl"
        self.lock_path = self.directory / f"{name}.lock"
        self._log = EventLog(self.log_path, what="sweep log")

    def exists(self) -> bool:
        return self.spec_path.exists()

    def create(self, spec: SweepSpec) -> None:
        ensure_dir(self.directory)
        self.log_path.unlink(missing_ok=True)
        _write_json_atomic(self.spec_path, {"name": self.name, "spec": spec.to_json()})

    def remove(self) -> None:
        for path in (self.spec_path, self.log_path, self.lock_path):
            path.unlink(missing_ok=True)

    def spec(self) -> SweepSpec:
        from k26ctl import inputs, statefile

        if not os.path.lexists(self.spec_path):
            raise UsageError(
                f"no sweep session {self.name!r} in {self.directory}",
                "start one: k26ctl sweep PROFILE --param KEY=SPEC",
            )
        document = statefile.read_document(
            self.spec_path,
            SweepFileShape,
            what="sweep session",
            hint=f"fix the field, or remove {self.spec_path} and {self.log_path.name} to start over",
            max_bytes=inputs.MAX_PROFILE_BYTES,
        )
        return SweepSpec.from_json(document.spec.model_dump())

    # ---- records ---------------------------------------------------------------------------------

    def record_start(self, number: int, assignment: Assignment, role: str) -> None:
        self._log.append(
            {"event": "start", "number": number, "assignment": assignment, "role": role, "time": time.time()}
        )

    def record_point(self, record: PointRecord) -> None:
        self._log.append(record.to_json())

    def _records(self) -> list[dict[str, Any]]:
        return self._log.records()

    def read_points(self) -> Records[PointRecord]:
        """Measured points that read, in order (a point recorded twice keeps its first record), and a
        problem for each record that does not."""
        read = self._log.read(log_record_shape)
        measured = [PointRecord.from_shape(r) for r in read.items if isinstance(r, PointShape)]
        return Records(first_wins(measured, lambda point: point_id(point.assignment)), read.problems)

    def points(self) -> list[PointRecord]:
        """The measured points; any unreadable record is a BadStateError (a sweep never resumes past it)."""
        read = self.read_points()
        read.refuse("sweep log", self.reset_hint())
        return read.items

    def reset_hint(self) -> str:
        session = "" if self.name == DEFAULT_SESSION else f" --session {self.name}"
        return f"k26ctl sweep reset{session} puts back what was live and forgets the session"

    def interrupted(self) -> dict[str, Any] | None:
        """The last start record without its point record, if any."""
        return self._log.interrupted("start", "point", "number")

    def locked(self) -> AbstractContextManager[None]:
        in_use = f"sweep session {self.name!r} is in use by another k26ctl process"
        hint = "wait for it, or use --session NAME for a separate sweep"
        return exclusive(self.lock_path, SweepLocked(in_use, hint))


def by_id(points: Sequence[PointRecord]) -> dict[str, PointRecord]:
    return {point_id(p.assignment): p for p in points}
