"""The watcher's state changes kept on the host too, beside the deploy history.

`/var/lib/k26ctl/<service>/watch-history.jsonl`: one JSON line per confirmed state change with its
evidence, so every operator of the host sees when it went bad and why, whoever ran the watcher.
Appended atomically through the same `write_file_atomic` as the deploy history (read, add a line,
write through a temporary file and rename), at most MAX_RECORDS lines.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from k26ctl.deploy.history import MAX_RECORDS, state_dir
from k26ctl.remote.base import Host
from k26ctl.watch.store import history_records

if TYPE_CHECKING:
    from k26ctl.profile import Profile


def watch_history_path(service: str) -> str:
    return f"{state_dir(service)}/watch-history.jsonl"


def append_watch_record(host: Host, service: str, record: dict[str, Any]) -> None:
    path = watch_history_path(service)
    raw = host.read_file(path, sudo=True) or b""
    lines = [line for line in raw.decode("utf-8", "replace").splitlines() if line.strip()]
    lines = [*lines, json.dumps(record, sort_keys=True, ensure_ascii=False, default=str)][-MAX_RECORDS:]
    host.run(["mkdir", "-p", state_dir(service)], sudo=True, check=True)
    host.write_file_atomic(path, ("\n".join(lines) + "\n").encode(), mode=0o644, sudo=True, backup=False)


def read_watch_history(host: Host, service: str) -> list[dict[str, Any]]:
    path = watch_history_path(service)
    raw = host.read_file(path, sudo=True) or b""
    return history_records(raw.decode("utf-8", "replace").splitlines(), f"{host.name}:{path}")


def record_on_host(profile: Profile, record: dict[str, Any], accept_new_host_key: bool = False) -> None:
    """Append `record` on the profile's host (a connection of its own: the change is rare)."""
    from k26ctl.remote import connect

    with connect(profile, accept_new_host_key=accept_new_host_key) as host:
        append_watch_record(host, profile.service.name, record)
