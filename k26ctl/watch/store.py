"""The watcher's local state: `$XDG_STATE_HOME/k26ctl/watch/<target>/`.

`baseline.json` (the answers of the first healthy cycle; `--rebaseline` removes it), `last.json` (the
last cycle's verdict and the confirmed state, read by `k26ctl status`) and `history.jsonl` (one line
per confirmed state change, with its evidence: the first probe mismatch decoded, the first failing
answer). Every write is atomic (a temporary file renamed over the old one).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from k26ctl.documents import tagged, untagged
from k26ctl.errors import ConfigError
from k26ctl.outputs import write_atomic
from k26ctl.statedir import ensure_dir, state_root

if TYPE_CHECKING:
    from k26ctl.profile import LoadedProfile

MAX_HISTORY = 1000


def watch_root() -> Path:
    return state_root() / "k26ctl" / "watch"


def target_key(profile_name: str | None, url: str | None) -> str:
    """A directory name for what is watched: the profile's name, or the URL's host and port."""
    raw = profile_name if profile_name else "url-" + re.sub(r"^https?://", "", url or "")
    return re.sub(r"[^A-Za-z0-9._-]+", "_", raw).strip("._") or "target"


@dataclass(frozen=True)
class WatchStore:
    root: Path

    @classmethod
    def for_target(cls, key: str, create: bool = True) -> WatchStore:
        path = watch_root() / key
        return cls(ensure_dir(path) if create else path)

    @property
    def baseline(self) -> Path:
        return self.root / "baseline.json"

    @property
    def last(self) -> Path:
        return self.root / "last.json"

    @property
    def history(self) -> Path:
        return self.root / "history.jsonl"

    def slice_baseline(self, index: int, count: int) -> Path:
        """The baseline of one canary slice (one slice: the single baseline of old)."""
        return self.baseline if count <= 1 else self.root / f"baseline-slice{index + 1}of{count}.json"

    @property
    def cursor(self) -> Path:
        """The next canary slice to run, kept across `watch --once` runs."""
        return self.root / "slice.json"

    def next_slice(self, count: int) -> int:
        data = _read_json(self.cursor) or {}
        value = data.get("next")
        return value % count if isinstance(value, int) and value >= 0 and count > 0 else 0

    def advance_slice(self, index: int, count: int) -> None:
        write_atomic(self.cursor, json.dumps({"next": (index + 1) % max(1, count)}) + "\n")

    def forget_baseline(self) -> bool:
        existed = False
        for path in [self.baseline, *self.root.glob("baseline-slice*.json")]:
            existed = existed or path.exists()
            path.unlink(missing_ok=True)
        return existed

    def write_last(self, record: dict[str, Any]) -> None:
        document = tagged("watch", record)
        write_atomic(self.last, json.dumps(document, ensure_ascii=False, sort_keys=True) + "\n")

    def read_last(self) -> dict[str, Any] | None:
        record = _read_json(self.last)
        return untagged(record) if record is not None else None

    def append_history(self, record: dict[str, Any]) -> None:
        lines = self.read_history_lines()[-(MAX_HISTORY - 1) :]
        lines.append(json.dumps(record, ensure_ascii=False, sort_keys=True))
        write_atomic(self.history, "\n".join(lines) + "\n")

    def read_history_lines(self) -> list[str]:
        try:  # a damaged byte costs its line, not the history
            text = self.history.read_bytes().decode("utf-8", "replace")
        except OSError:
            return []
        return [line for line in text.splitlines() if line.strip()]

    def read_history(self) -> list[dict[str, Any]]:
        return history_records(self.read_history_lines(), self.history)


def history_records(lines: Iterable[str], where: str | Path) -> list[dict[str, Any]]:
    """The change records of a history that read, decoded as all state k26ctl reads back; a damaged
    line is left out, since a history is only shown, never judged from."""
    from k26ctl.statefile import parse_lines

    return parse_lines(lines, where, lambda _record: dict, torn_tail=True).items


def last_verdict(loaded: LoadedProfile) -> dict[str, Any] | None:
    """The last record of this machine's watcher of `loaded`'s server (None: never watched here)."""
    name = loaded.profile.name or (loaded.path.stem if loaded.path else "")
    try:
        return WatchStore.for_target(target_key(name, None), create=False).read_last()
    except ConfigError:  # no usable state directory: nothing was recorded
        return None


def _read_json(path: Path) -> dict[str, Any] | None:
    from k26ctl import jsonsafe

    try:
        data = jsonsafe.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
