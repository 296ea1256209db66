"""A persisted bisect session on the shared session core (k26ctl.search.session):

    $XDG_STATE_HOME/k26ctl/bisect/<name>.json        the spec (written once, plus the final outcome)
    $XDG_STATE_HOME/k26ctl/bisect/<name>.log.jsonl   one record per line, appended and fsynced:
        {"event": "start",  "step": n, "assignment": {...}, ...}   before a step deploys anything
        {"event": "finish", "step": n, "assignment": {...}, "verdict": ..., "seconds": ..., ...}

A finished step is never redone, because the strategies only ever ask for configurations without a
verdict. Records are read back through the shapes in `k26ctl.bisect.shapes`; a search never resumes
past a record it cannot read (its verdict would be lost or wrong); `read_steps` still hands over
every readable step for showing.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from k26ctl.bisect.shapes import FinishShape, SessionFileShape, log_record_shape
from k26ctl.search.assignment import Assignment, assignment_id
from k26ctl.search.session import SearchSession, SessionKind
from k26ctl.search.verdict import Verdict
from k26ctl.statefile import Records

START = "k26ctl bisect-config PROFILE --param KEY --good A --bad B"
BISECT = SessionKind("bisect", "bisect-config", "search", START)


@dataclass
class SessionSpec:
    """Everything needed to rebuild the search and its step runner after a restart of k26ctl."""

    mode: str  # "numeric" | "set"
    profile: str | None = None  # numeric: the profile file searched
    param: str | None = None
    candidates: list[Any] = field(default_factory=list)
    good_profile: str | None = None  # set mode
    bad_profile: str | None = None
    changes: list[dict[str, Any]] = field(default_factory=list)  # set mode: the differing keys
    sets: list[str] = field(default_factory=list)  # --set overrides applied to every profile
    run: str | None = None  # --run CMD (instead of smoke)
    deploy: bool = True
    tries: int = 1
    verify_ends: bool = True
    bad_end_first: bool = False  # numeric: the host already ran the bad end when the search began
    load_failure_is_bad: bool = False
    refine: bool = True
    original: dict[str, Any] | None = None  # what was live before the search (for reset)
    created: float = field(default_factory=time.time)
    cwd: str = field(default_factory=os.getcwd)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SessionSpec:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)


@dataclass(frozen=True)
class StepRecord:
    step: int
    assignment: Assignment
    verdict: Verdict
    seconds: float
    restarted: bool
    tries: list[str]
    detail: str
    replayed: bool = False
    load_seconds: float | None = None  # the server's own start-to-ready time of a restart, from its journal
    phases: dict[str, Any] | None = None  # where that restart's time went (deploy.phases JSON)

    def to_json(self) -> dict[str, Any]:
        fields = {**asdict(self), "verdict": self.verdict.value, "seconds": round(self.seconds, 3)}
        return {"event": "finish", **fields, "time": time.time()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StepRecord:
        """A finish record as written by `to_json`; pydantic's ValidationError names a wrong field."""
        return cls.from_shape(FinishShape.model_validate(data))

    @classmethod
    def from_shape(cls, shape: FinishShape) -> StepRecord:
        return cls(**{name: getattr(shape, name) for name in cls.__dataclass_fields__})


class Session(SearchSession):
    kind = BISECT

    def create(self, spec: SessionSpec) -> None:
        self.write_new({"spec": spec.to_json(), "outcome": None})

    def create_keep_log(self, spec: SessionSpec) -> None:
        """Rewrite the spec (e.g. with what was live captured late) without touching the records."""
        self.write_document({"spec": spec.to_json(), "outcome": None})

    def spec(self) -> SessionSpec:
        return SessionSpec.from_json(self._document().spec.model_dump())

    def outcome(self) -> dict[str, Any] | None:
        return self._document().outcome

    def save_outcome(self, outcome: dict[str, Any] | None) -> None:
        self.write_document({"spec": self.spec().to_json(), "outcome": outcome})

    def _document(self) -> SessionFileShape:
        return self.read_document(SessionFileShape)

    # ---- records ----------------------------------------------------------------------------------

    def record_start(self, step: int, assignment: Assignment, purpose: str) -> None:
        record = {"event": "start", "step": step, "assignment": assignment, "purpose": purpose}
        self.append({**record, "time": time.time()})

    def record_finish(self, record: StepRecord) -> None:
        self.append(record.to_json())

    def read_steps(self) -> Records[StepRecord]:
        """Every finished step that reads, in order (a configuration finished twice keeps its first
        verdict), and a problem for each record that does not."""
        return self.judged(
            log_record_shape, FinishShape, StepRecord.from_shape, lambda step: assignment_id(step.assignment)
        )

    def finished_steps(self) -> list[StepRecord]:
        """The finished steps; any unreadable record is a BadStateError (a search never resumes past it)."""
        return self.all_readable(self.read_steps())

    def interrupted_step(self) -> dict[str, Any] | None:
        """The last start record without a matching finish (a step to redo), if any."""
        return self.unfinished_start("finish", "step")
