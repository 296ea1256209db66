"""What a server's configuration accepted in earlier smoke runs of `smoke --url`, kept locally.

A deploy keeps its smoke result in the host's history; a server reached by URL has no such history,
so each passing run's accept length is kept under the state directory
($XDG_STATE_HOME/k26ctl/smoke-accept.json), keyed by the URL, the model and the speculative server
arguments the server reports. The next run of the same configuration is judged against it
(smoke/acceptance.py): a collapse against it fails, a merely low value does not.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
from pathlib import Path
from typing import Any

from k26ctl.smoke.acceptance import PriorAccept

MAX_ENTRIES = 200
FILE_NAME = "smoke-accept.json"


def default_path() -> Path:
    from k26ctl.statedir import state_root

    return state_root() / "k26ctl" / FILE_NAME


def config_key(base_url: str, identity: dict[str, Any]) -> str:
    """The URL, model and server arguments (speculative flags among them) of one configuration."""
    blob = json.dumps({"url": base_url.rstrip("/"), **identity}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


class AcceptMemory:
    """The local record; unreadable or unwritable files are treated as empty (it is a convenience)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path

    def _file(self) -> Path | None:
        if self.path is not None:
            return self.path
        try:
            return default_path()
        except Exception:  # no home directory: no record, not an error
            return None

    def _load(self) -> dict[str, Any]:
        path = self._file()
        if path is None:
            return {}
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def prior(self, base_url: str, identity: dict[str, Any]) -> PriorAccept | None:
        entry = self._load().get(config_key(base_url, identity))
        if not isinstance(entry, dict):
            return None
        value = entry.get("accept_length")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None
        return PriorAccept(float(value), str(entry.get("when", "")), f"the local record {self._file()}")

    def remember(self, base_url: str, identity: dict[str, Any], accept_length: float) -> None:
        path = self._file()
        if path is None:
            return
        data = self._load()
        data[config_key(base_url, identity)] = {
            "accept_length": round(accept_length, 4),
            "when": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "url": base_url,
            "model": identity.get("model"),
            "speculative_algorithm": (identity.get("server_args") or {}).get("speculative_algorithm"),
        }
        if len(data) > MAX_ENTRIES:
            oldest = sorted(data, key=lambda k: str(data[k].get("when", "")))
            for key in oldest[: len(data) - MAX_ENTRIES]:
                del data[key]
        try:
            from k26ctl.outputs import write_atomic

            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, json.dumps(data, indent=1, sort_keys=True) + "\n")
        except Exception:  # a read-only state directory must not fail a passing run
            return
