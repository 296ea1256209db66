"""systemd operations on a Host: unit lifecycle, `show` properties, and the unit's journal.

Everything goes through `systemctl`/`journalctl` on the host (run as root via sudo when needed), so
the same code drives the production host, the lab host, and `systemctl --user` on a workstation.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from k26ctl.errors import RemoteCommandError
from k26ctl.remote.base import CommandResult, Host

DEFAULT_PROPERTIES = (
    "ActiveState",
    "SubState",
    "Result",
    "NRestarts",
    "ExecMainStatus",
    "ExecMainCode",
    "MainPID",
    "LoadState",
    "UnitFileState",
    "NeedDaemonReload",
    "FragmentPath",
    "ActiveEnterTimestamp",
    "InactiveEnterTimestamp",
    "ExecMainStartTimestamp",
    "ExecMainExitTimestamp",
    "StateChangeTimestamp",
)

PRIORITIES = ("emerg", "alert", "crit", "err", "warning", "notice", "info", "debug")


@dataclass(frozen=True)
class JournalEntry:
    cursor: str
    timestamp_us: int
    priority: int
    message: str
    pid: int | None

    @property
    def time(self) -> datetime:
        return datetime.fromtimestamp(self.timestamp_us / 1e6).astimezone()

    def format(self) -> str:
        stamp = self.time.strftime("%H:%M:%S")
        return f"{stamp} [{self.pid or '-'}] {self.message}"


def parse_journal_line(line: str) -> JournalEntry | None:
    """One `journalctl -o json` line -> JournalEntry (None for blank or non-JSON lines)."""
    line = line.strip()
    if not line.startswith("{"):
        return None
    try:
        data: dict[str, Any] = json.loads(line)
    except ValueError:
        return None
    message = data.get("MESSAGE", "")
    if isinstance(message, list):  # journald sends non-UTF-8 messages as a byte array
        message = bytes(int(b) for b in message).decode("utf-8", "replace")
    elif message is None:
        message = ""
    pid = data.get("_PID") or data.get("SYSLOG_PID")
    return JournalEntry(
        cursor=str(data.get("__CURSOR", "")),
        timestamp_us=int(data.get("__REALTIME_TIMESTAMP", 0)),
        priority=int(data.get("PRIORITY", 6)),
        message=str(message),
        pid=int(pid) if pid and str(pid).isdigit() else None,
    )


def _since_arg(since: datetime | float | int | str) -> str:
    if isinstance(since, datetime):
        return f"@{since.timestamp():.6f}"
    if isinstance(since, (int, float)):
        return f"@{float(since):.6f}"
    return since


def _priority_arg(priority: int | str) -> str:
    if isinstance(priority, int):
        if not 0 <= priority <= 7:
            raise ValueError(f"journal priority must be 0..7, got {priority}")
        return str(priority)
    if priority not in PRIORITIES and not priority.isdigit():
        raise ValueError(f"journal priority must be one of {', '.join(PRIORITIES)}, got {priority!r}")
    return priority


# A login without PAM (plain `ssh host cmd`, cron) has no XDG_RUNTIME_DIR, which `systemctl --user`
# needs to find the user's manager; its default location is /run/user/UID.
_USER_RUNTIME = 'XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/run/user/$(id -u)}" exec "$@"'


class Systemd:
    """One unit on one host. `user=True` drives the user manager (`systemctl --user`); the default
    follows the host (`LocalHost.user_manager`: not root and a user manager runs)."""

    def __init__(self, host: Host, unit: str, *, user: bool | None = None) -> None:
        self.host = host
        self.unit = unit
        self.user = bool(getattr(host, "user_manager", False)) if user is None else user

    def _run(self, argv: list[str], *, check: bool) -> CommandResult:
        if self.user:
            return self.host.run(["sh", "-c", _USER_RUNTIME, "k26ctl", *argv], check=check)
        return self.host.run(argv, sudo=True, check=check)

    # ---- commands ---------------------------------------------------------------------------

    def _systemctl(self, *args: str, check: bool = True) -> CommandResult:
        scope = ["--user"] if self.user else []
        return self._run(["systemctl", *scope, *args], check=check)

    def daemon_reload(self) -> None:
        self._systemctl("daemon-reload")

    def _job(self, verb: str) -> None:
        res = self._systemctl(verb, self.unit, check=False)
        if not res.ok:
            detail = res.stderr.strip().splitlines()[0] if res.stderr.strip() else f"exit {res.returncode}"
            raise RemoteCommandError(
                f"{self.host.name}: systemctl {verb} {self.unit} failed: {detail}",
                f"see `journalctl -u {self.unit}` on the host",
                returncode=res.returncode,
                stderr=res.stderr,
            )

    def start(self) -> None:
        self._job("start")

    def stop(self) -> None:
        self._job("stop")

    def restart(self) -> None:
        self._job("restart")

    def reset_failed(self) -> None:
        self._systemctl("reset-failed", self.unit, check=False)

    def is_active(self) -> str:
        """active, inactive, failed, activating, deactivating, reloading (or unknown)."""
        res = self._systemctl("is-active", self.unit, check=False)
        return res.stdout.strip() or "unknown"

    def show(self, *props: str) -> dict[str, str]:
        wanted = props or DEFAULT_PROPERTIES
        res = self._systemctl("show", self.unit, "--no-pager", "-p", ",".join(wanted))
        values: dict[str, str] = {}
        for line in res.stdout.splitlines():
            key, sep, value = line.partition("=")
            if sep:
                values[key] = value
        return values

    def needs_daemon_reload(self) -> bool:
        """True when the unit file on disk differs from what systemd loaded."""
        return self.show("NeedDaemonReload").get("NeedDaemonReload") == "yes"

    # ---- journal ----------------------------------------------------------------------------

    # Cursors are passed with --cursor (inclusive) and the cursor's own entry dropped here: with a unit
    # filter, systemd 252's --after-cursor also skips the first *matching* entry after the cursor.

    def _journal_argv(self, *extra: str) -> list[str]:
        unit = ["--user-unit", self.unit] if self.user else ["-u", self.unit]
        # --all: without it journalctl -o json turns fields over 4096 bytes into null, and SGLang's
        # tqdm load bar reaches the journal as one record of ~5 KB for a 64-shard checkpoint.
        return ["journalctl", *unit, "-o", "json", "--all", "--no-pager", *extra]

    def journal(
        self,
        since: datetime | float | str | None = None,
        cursor: str | None = None,
        priority: int | str | None = None,
        lines: int | None = None,
    ) -> list[JournalEntry]:
        """The unit's journal entries after `cursor` (exclusive) or since a time, oldest first;
        `lines` keeps only the newest N of them."""
        extra: list[str] = []
        if cursor:
            extra += ["--cursor", cursor]
        if since is not None:
            extra += ["--since", _since_arg(since)]
        if priority is not None:
            extra += ["-p", _priority_arg(priority)]
        if lines is not None and not cursor and since is None:
            extra += ["-n", str(int(lines))]
        res = self._run(self._journal_argv(*extra), check=True)
        entries = [e for e in map(parse_journal_line, res.stdout.splitlines()) if e is not None]
        entries = [e for e in entries if e.cursor != cursor]
        # with a starting point journalctl's -n counts from it; `lines` always means the newest N
        return entries[-lines:] if lines else entries

    def follow(self, cursor: str | None = None, *, timeout: float | None = None) -> Iterator[JournalEntry]:
        """New entries as they are written (after `cursor` when given). Close the iterator to stop;
        with `timeout` it also ends by itself after that many seconds, quiet journal or not."""
        extra = ["-f"] + (["--cursor", cursor] if cursor else ["-n", "0"])
        argv = self._journal_argv(*extra)
        if self.user:
            lines = self.host.stream(["sh", "-c", _USER_RUNTIME, "k26ctl", *argv], timeout=timeout)
        else:
            lines = self.host.stream(argv, sudo=True, timeout=timeout)
        try:
            for line in lines:
                entry = parse_journal_line(line)
                if entry is not None and entry.cursor != cursor:
                    yield entry
        finally:
            close = getattr(lines, "close", None)
            if close is not None:
                close()

    def cursor_now(self) -> str:
        """A cursor at the end of the whole journal: later entries of this unit come after it."""
        scope = ["--user"] if self.user else []
        res = self._run(["journalctl", *scope, "-o", "json", "-n", "1", "--no-pager"], check=True)
        for line in reversed(res.stdout.splitlines()):
            entry = parse_journal_line(line)
            if entry is not None:
                return entry.cursor
        return ""
