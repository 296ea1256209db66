"""A persisted bisect session: one JSON file for what is searched, one JSON Lines file for what happened.

    $XDG_STATE_HOME/k26ctl/bisect/<name>.json        the spec (written once, plus the final outcome)
    $XDG_STATE_HOME/k26ctl/bisect/<name>.log.jsonl   one record per line, appended and fsynced:
        {"event": "start",  "step": n, "assignment": {...}, ...}   before a step deploys anything
        {"event": "finish", "step": n, "assignment": {...}, "verdict": ..., "seconds": ..., ...}

A step with a start record but no finish record was interrupted and is redone; a finished step is
never redone, because the strategies only ever ask for configurations without a verdict. A torn last
line (the process died while writing it) is ignored.

Both files are read back through `k26ctl.statefile` and the shapes in `k26ctl.bisect.shapes`: a file
edited into something else is one error (exit 78) naming the file, the line and the field, never a
traceback, and a search never resumes past a record it cannot read (its verdict would be lost or
wrong); `read_steps` still hands over every readable step for showing.
"""

from __future__ import annotations

import json
import os
import re
import time
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from k26ctl.bisect.eventlog import EventLog, exclusive, first_wins
from k26ctl.bisect.plan import Assignment, assignment_id
from k26ctl.bisect.shapes import FinishShape, SessionFileShape, log_record_shape
from k26ctl.bisect.verdict import Verdict
from k26ctl.errors import K26Error, UsageError
from k26ctl.statedir import ensure_dir
from k26ctl.statefile import Records

SESSION_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
DEFAULT_SESSION = "default"


def state_dir() -> Path:
    from k26ctl.statedir import state_root

    return state_root() / "k26ctl" / "bisect"


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
        return {
            "event": "finish",
            "step": self.step,
            "assignment": self.assignment,
            "verdict": self.verdict.value,
            "seconds": round(self.seconds, 3),
            "restarted": self.restarted,
            "tries": self.tries,
            "detail": self.detail,
            "replayed": self.replayed,
            "load_seconds": self.load_seconds,
            "phases": self.phases,
            "time": time.time(),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StepRecord:
        """A finish record as written by `to_json`; pydantic's ValidationError names a wrong field."""
        return cls.from_shape(FinishShape.model_validate(data))

    @classmethod
    def from_shape(cls, shape: FinishShape) -> StepRecord:
        return cls(
            step=shape.step,
            assignment=shape.assignment,
            verdict=shape.verdict,
            seconds=shape.seconds,
            restarted=shape.restarted,
            tries=shape.tries,
            detail=shape.detail,
            replayed=shape.replayed,
            load_seconds=shape.load_seconds,
            phases=shape.phases,
        )


RESET_HINT = "k26ctl bisect-config reset{session} puts back what was live and forgets the session"


def reset_hint(name: str) -> str:
    return RESET_HINT.format(session="" if name == DEFAULT_SESSION else f" --session {name}")


class SessionLocked(K26Error):
    exit_code = 1


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_json_atomic(path: Path, document: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(document, handle, indent=2, default=str)
        handle.write("\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


class Session:
    def __init__(self, name: str, directory: Path | None = None) -> None:
        if not SESSION_NAME.match(name):
            raise UsageError(f"bad session name {name!r}", "letters, digits, '.', '_' and '-' only")
        self.name = name
        self.directory = directory or state_dir()
        self.spec_path = self.directory / f"{name}.json"
        self.log_path = self.directory / f"{name}.log.jsonl"
        self.lock_path = self.directory / f"{name}.lock"
        self._log = EventLog(self.log_path, what="bisect log")

    # ---- existence --------------------------------------------------------------------------------

    def exists(self) -> bool:
        return self.spec_path.exists()

    def create(self, spec: SessionSpec) -> None:
        ensure_dir(self.directory)
        self.log_path.unlink(missing_ok=True)
        _write_json_atomic(self.spec_path, {"name": self.name, "spec": spec.to_json(), "outcome": None})

    def create_keep_log(self, spec: SessionSpec) -> None:
        """Rewrite the spec (e.g. with what was live captured late) without touching the records."""
        _write_json_atomic(self.spec_path, {"name": self.name, "spec": spec.to_json(), "outcome": None})

    def remove(self) -> None:
        for path in (self.spec_path, self.log_path, self.lock_path):
            path.unlink(missing_ok=True)

    def spec(self) -> SessionSpec:
        return SessionSpec.from_json(self._document().spec.model_dump())

    def outcome(self) -> dict[str, Any] | None:
        return self._document().outcome

    def save_outcome(self, outcome: dict[str, Any] | None) -> None:
        spec = self.spec()
        _write_json_atomic(self.spec_path, {"name": self.name, "spec": spec.to_json(), "outcome": outcome})

    def _document(self) -> SessionFileShape:
        from k26ctl import statefile

        if not os.path.lexists(self.spec_path):
            raise UsageError(
                f"no bisect session {self.name!r} in {self.directory}",
                "start one: k26ctl bisect-config PROFILE --param KEY --good A --bad B",
            )
        # the session file holds what reset needs: when it is damaged, removing it is the way out
        return statefile.read_document(
            self.spec_path,
            SessionFileShape,
            what="bisect session",
            hint=f"fix the field, or remove {self.spec_path} and {self.log_path.name} to start over",
        )

    # ---- records ----------------------------------------------------------------------------------

    def record_start(self, step: int, assignment: Assignment, purpose: str) -> None:
        record = {"event": "start", "step": step, "assignment": assignment, "purpose": purpose}
        self._log.append({**record, "time": time.time()})

    def record_finish(self, record: StepRecord) -> None:
        self._log.append(record.to_json())

    def records(self) -> list[dict[str, Any]]:
        return self._log.records()

    def read_steps(self) -> Records[StepRecord]:
        """Every finished step that reads, in order (a configuration finished twice keeps its first
        verdict), and a problem for each record that does not."""
        read = self._log.read(log_record_shape)
        finished = [StepRecord.from_shape(r) for r in read.items if isinstance(r, FinishShape)]
        return Records(first_wins(finished, lambda step: assignment_id(step.assignment)), read.problems)

    def finished_steps(self) -> list[StepRecord]:
        """The finished steps; any unreadable record is a BadStateError (a search never resumes past it)."""
        read = self.read_steps()
        read.refuse("bisect log", reset_hint(self.name))
        return read.items

    def interrupted_step(self) -> dict[str, Any] | None:
        """The last start record without a matching finish (a step to redo), if any."""
        return self._log.interrupted("start", "finish", "step")

    # ---- exclusive use ----------------------------------------------------------------------------

    def locked(self) -> AbstractContextManager[None]:
        """One k26ctl process per session: two writers would interleave steps on the same host."""
        in_use = f"bisect session {self.name!r} is in use by another k26ctl process"
        hint = "wait for it, or use --session NAME for a separate search"
        return exclusive(self.lock_path, SessionLocked(in_use, hint))
