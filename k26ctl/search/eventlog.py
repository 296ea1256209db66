"""The append-only JSON Lines event log and exclusive lock shared by bisect and sweep sessions.

One record per line, appended and fsynced. The log is read as untrusted input (a regular file within
the data size limit, UTF-8, JSON within jsonsafe's limits). A torn last line (the process died while
writing it) is ignored when reading and cut before the next append. `read` validates each record
against the caller's shapes (`k26ctl.statefile.parse_lines`) and hands back the readable records
with a problem line for each other one; `records` refuses (exit 78) when any line is unreadable.
A start record without its matching end record means the work it announced was
interrupted.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from k26ctl.statedir import ensure_dir
from k26ctl.statefile import Records, parse_lines

T = TypeVar("T")


class EventLog:
    def __init__(self, path: Path, *, what: str) -> None:
        self.path = path
        self.what = what  # how refusals name the file, e.g. "sweep log"

    def _drop_torn_tail(self) -> None:
        """Cut a last line left half-written by a killed process, so new records start on a fresh line."""
        try:
            with open(self.path, "rb+") as handle:
                data = handle.read()
                if data and not data.endswith(b"\n"):
                    handle.truncate(data.rfind(b"\n") + 1)
                    handle.flush()
                    os.fsync(handle.fileno())
        except FileNotFoundError:
            pass

    def append(self, record: dict[str, Any]) -> None:
        self._drop_torn_tail()
        line = json.dumps(record, default=str, separators=(",", ":")) + "\n"
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())

    def read(self, shape_of: Callable[[dict[str, Any]], type[T] | None]) -> Records[T]:
        """Records validated by the shape `shape_of` picks for each; a torn last line is dropped
        (the work it belonged to is simply redone)."""
        from k26ctl import inputs

        if not os.path.lexists(self.path):
            return Records()
        text = inputs.read_text(
            self.path, what=self.what, max_bytes=inputs.MAX_DATA_BYTES, hint="remove the session"
        )
        # "\n" only: a U+2028 inside a JSON string is part of its line
        return parse_lines(text.split("\n"), self.path, shape_of, torn_tail=True)

    def records(self) -> list[dict[str, Any]]:
        """Every record as a JSON object; an unreadable line is a BadStateError naming it."""
        read = self.read(lambda record: dict)
        read.refuse(self.what, "remove the line or the session")
        return read.items

    def interrupted(self, start_event: str, end_event: str, key: str) -> dict[str, Any] | None:
        """The last `start_event` record without a following `end_event` record with the same `key`."""
        open_start: dict[str, Any] | None = None
        for record in self.records():
            if record.get("event") == start_event:
                open_start = record
            elif (
                record.get("event") == end_event
                and open_start is not None
                and open_start.get(key) == record.get(key)
            ):
                open_start = None
        return open_start


def first_wins(items: Iterable[T], ident: Callable[[T], str]) -> list[T]:
    """`items` in order, keeping only the first of those with the same `ident`."""
    kept, seen = [], set()
    for item in items:
        key = ident(item)
        if key not in seen:
            seen.add(key)
            kept.append(item)
    return kept


@contextlib.contextmanager
def exclusive(lock_path: Path, refused: Exception) -> Iterator[None]:
    """Hold an exclusive, non-blocking flock on `lock_path`; raise `refused` if another process has it."""
    ensure_dir(lock_path.parent)
    with open(lock_path, "a+") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise refused from None
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
