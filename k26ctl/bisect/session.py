"""A persisted bisect session: one JSON file for what is searched, one JSON Lines file for what happened.

    $XDG_STATE_HOME/k26ctl/bisect/<name>.json        the spec (written once, plus the final outcome)
    $XDG_STATE_HOME/k26ctl/bisect/<name>.log.jsonl   one record per line, appended and fsynced:
        {"event": "start",  "step": n, "assignment": {...}, ...}   before a step deploys anything
        {"event": "finish", "step": n, "assignment": {...}, "verdict": ..., "seconds": ..., ...}

A step with a start record but no finish record was interrupted and is redone; a finished step is
never redone, because the strategies only ever ask for configurations without a verdict. A torn last
line (the process died while writing it) is ignored.
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
from k26ctl.bisect.verdict import Verdict
from k26ctl.errors import K26Error, UsageError
from k26ctl.statedir import ensure_dir

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
            "time": time.time(),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StepRecord:
        return cls(
            step=int(data["step"]),
            assignment=dict(data["assignment"]),
            verdict=Verdict(data["verdict"]),
            seconds=float(data.get("seconds", 0.0)),
            restarted=bool(data.get("restarted", False)),
            tries=list(data.get("tries", [])),
            detail=str(data.get("detail", "")),
            replayed=bool(data.get("replayed", False)),
            load_seconds=_seconds_or_none(data.get("load_seconds")),
        )


def _seconds_or_none(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


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
        return SessionSpec.from_json(self._document()["spec"])

    def outcome(self) -> dict[str, Any] | None:
        outcome = self._document().get("outcome")
        return outcome if isinstance(outcome, dict) else None

    def save_outcome(self, outcome: dict[str, Any] | None) -> None:
        document = self._document()
        document["outcome"] = outcome
        _write_json_atomic(self.spec_path, document)

    def _document(self) -> dict[str, Any]:
        try:
            document = json.loads(self.spec_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise UsageError(
                f"no bisect session {self.name!r} in {self.directory}",
                "start one: k26ctl bisect-config PROFILE --param KEY --good A --bad B",
            ) from None
        except (OSError, ValueError) as exc:
            raise K26Error(f"cannot read {self.spec_path}: {exc}", "remove it to start over") from None
        if not isinstance(document, dict) or not isinstance(document.get("spec"), dict):
            raise K26Error(f"{self.spec_path} is not a bisect session", "remove it to start over")
        return document

    # ---- records ----------------------------------------------------------------------------------

    def record_start(self, step: int, assignment: Assignment, purpose: str) -> None:
        record = {"event": "start", "step": step, "assignment": assignment, "purpose": purpose}
        self._log.append({**record, "time": time.time()})

    def record_finish(self, record: StepRecord) -> None:
        self._log.append(record.to_json())

    def records(self) -> list[dict[str, Any]]:
        return self._log.records()

    def finished_steps(self) -> list[StepRecord]:
        """Finished steps in order; a configuration finished twice (edited logs) keeps its first verdict."""
        finished = [StepRecord.from_json(r) for r in self.records() if r.get("event") == "finish"]
        return first_wins(finished, lambda step: assignment_id(step.assignment))

    def interrupted_step(self) -> dict[str, Any] | None:
        """The last start record without a matching finish (a step to redo), if any."""
        return self._log.interrupted("start", "finish", "step")

    # ---- exclusive use ----------------------------------------------------------------------------

    def locked(self) -> AbstractContextManager[None]:
        """One k26ctl process per session: two writers would interleave steps on the same host."""
        in_use = f"bisect session {self.name!r} is in use by another k26ctl process"
        hint = "wait for it, or use --session NAME for a separate search"
        return exclusive(self.lock_path, SessionLocked(in_use, hint))
