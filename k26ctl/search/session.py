"""A named search session on disk: one JSON file for what is searched, one JSON Lines log for what
happened, one lock file.

    $XDG_STATE_HOME/k26ctl/<noun>/<name>.json        the spec (rewritten atomically)
    $XDG_STATE_HOME/k26ctl/<noun>/<name>.log.jsonl   one record per line, appended and fsynced:
        a start record before a step deploys anything, its end record when the step is judged

A start record without its end record was interrupted and is redone; a judged step is never redone
(the planners look every configuration up by its canonical assignment); a torn last line is ignored.
Both files are read back through `k26ctl.statefile` and the caller's shapes: a damaged file is one
error (exit 78) naming the file, the line and the field, never a traceback. bisect-config and sweep
subclass `SearchSession` with their own records.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel

from k26ctl.documents import tagged
from k26ctl.errors import K26Error, UsageError
from k26ctl.search.eventlog import EventLog, exclusive, first_wins
from k26ctl.statedir import ensure_dir
from k26ctl.statefile import Records

SESSION_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
DEFAULT_SESSION = "default"

Shape = TypeVar("Shape", bound=BaseModel)
Judged = TypeVar("Judged")  # a session's own record of one judged configuration


@dataclass(frozen=True)
class SessionKind:
    """How one search command names its sessions."""

    noun: str  # "bisect", "sweep": the state folder and how messages name the session and its log
    command: str  # "bisect-config", "sweep"
    what: str  # what messages call one run: "search", "sweep"
    start: str  # how to start one (the hint when none exists)


class SessionLocked(K26Error):
    exit_code = 1


def state_dir(noun: str) -> Path:
    from k26ctl.statedir import state_root

    return state_root() / "k26ctl" / noun


def write_json_atomic(path: Path, document: dict[str, Any]) -> None:
    """Write `document` to a temporary file beside `path`, fsync it, rename it over `path`, fsync the
    folder: a reader sees the old document or the new one, never a half."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(document, handle, indent=2, default=str)
        handle.write("\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class SearchSession:
    kind: ClassVar[SessionKind]

    def __init__(self, name: str, directory: Path | None = None) -> None:
        if not SESSION_NAME.match(name):
            raise UsageError(f"bad session name {name!r}", "letters, digits, '.', '_' and '-' only")
        self.name = name
        self.directory = directory or state_dir(self.kind.noun)
        self.spec_path = self.directory / f"{name}.json"
        self.log_path = self.directory / f"{name}.log.jsonl"
        self.lock_path = self.directory / f"{name}.lock"
        self._log = EventLog(self.log_path, what=self.log_name)

    @property
    def log_name(self) -> str:
        return f"{self.kind.noun} log"

    # ---- the session file -------------------------------------------------------------------------

    def exists(self) -> bool:
        return self.spec_path.exists()

    def write_new(self, document: dict[str, Any]) -> None:
        """Start the session: its file, and an empty log."""
        ensure_dir(self.directory)
        self.log_path.unlink(missing_ok=True)
        self.write_document(document)

    def write_document(self, document: dict[str, Any]) -> None:
        tag = f"{self.kind.noun}-session"
        write_json_atomic(self.spec_path, tagged(tag, {"name": self.name, **document}))

    def read_document(self, shape: type[Shape], max_bytes: int | None = None) -> Shape:
        from k26ctl import statefile

        if not os.path.lexists(self.spec_path):
            raise UsageError(
                f"no {self.kind.noun} session {self.name!r} in {self.directory}",
                f"start one: {self.kind.start}",
            )
        # the session file holds what reset needs: when it is damaged, removing it is the way out
        return statefile.read_document(
            self.spec_path,
            shape,
            what=f"{self.kind.noun} session",
            hint=f"fix the field, or remove {self.spec_path} and {self.log_path.name} to start over",
            max_bytes=max_bytes,
        )

    def remove(self) -> None:
        for path in (self.spec_path, self.log_path, self.lock_path):
            path.unlink(missing_ok=True)

    def refuse_existing(self) -> None:
        if self.exists():
            raise UsageError(
                f"{self.kind.noun} session {self.name!r} already exists ({self.spec_path})",
                f"continue it with --resume, end it with 'k26ctl {self.kind.command} reset' (restores the "
                "deployment), or pick another --session NAME",
            )

    def reset_hint(self) -> str:
        session = "" if self.name == DEFAULT_SESSION else f" --session {self.name}"
        return f"k26ctl {self.kind.command} reset{session} puts back what was live and forgets the session"

    # ---- the log ----------------------------------------------------------------------------------

    def append(self, record: dict[str, Any]) -> None:
        self._log.append(record)

    def records(self) -> list[dict[str, Any]]:
        return self._log.records()

    def judged(
        self,
        shape_of: Callable[[dict[str, Any]], type[Any] | None],
        end: type[Shape],
        record: Callable[[Shape], Judged],
        ident: Callable[[Judged], str],
    ) -> Records[Judged]:
        """The `end` records that read (`shape_of` picks each line's shape), as `record` makes them, in
        order (a configuration judged twice keeps its first record), and a problem for each line that
        does not read."""
        read = self._log.read(shape_of)
        ends = [record(r) for r in read.items if isinstance(r, end)]
        return Records(first_wins(ends, ident), read.problems)

    def all_readable(self, read: Records[Judged]) -> list[Judged]:
        """`read`'s records; any unreadable line is a BadStateError (a search never resumes past it)."""
        read.refuse(self.log_name, self.reset_hint())
        return read.items

    def unfinished_start(self, end_event: str, key: str) -> dict[str, Any] | None:
        """The last start record without its `end_event` record (matched on `key`): a step to redo."""
        return self._log.interrupted("start", end_event, key)

    # ---- exclusive use ----------------------------------------------------------------------------

    def locked(self) -> AbstractContextManager[None]:
        """One k26ctl process per session: two writers would interleave steps on the same host."""
        in_use = f"{self.kind.noun} session {self.name!r} is in use by another k26ctl process"
        hint = f"wait for it, or use --session NAME for a separate {self.kind.what}"
        return exclusive(self.lock_path, SessionLocked(in_use, hint))
