"""A simulated systemd unit with its journal and an SGLang-shaped readiness server, on a FakeHost.

Answers what a deploy asks a host: `systemctl show|daemon-reload|restart|enable|is-active|stop|
reset-failed`, `journalctl` (cursor, read, follow), the state directory's `mkdir`/copy/`rm`, and the
service Python's search for an sglang tree (none here: these profiles list no patches). A restart
writes systemd's own journal lines and then, in a moment, either the server's ready line (`outcome`
"ready") or a failed exit ("fail"), so the real readiness loop in `k26ctl.deploy.wait` runs against it.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from k26ctl.deploy.journal_scan import READY_TEXT
from k26ctl.profile import Profile
from k26ctl.remote.base import CommandResult
from k26ctl.remote.fake import Argv, FakeHost
from k26ctl.render import unit_name
from tests.support.serving import serve_in_thread


class ReadinessServer:
    """/health 200 and /v1/models listing `model`, on 127.0.0.1 (a thread of this process)."""

    def __init__(self, model: str) -> None:
        body = json.dumps({"object": "list", "data": [{"id": model}]}).encode()

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                status, payload = (200, b"{}") if self.path == "/health" else (200, body)
                if self.path not in ("/health", "/v1/models"):
                    status, payload = 404, b'{"detail": "Not Found"}'
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        serve_in_thread(self._server)

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@dataclass
class FakeService:
    """One unit on `host`. What restarts do: the next ones take `outcomes` in order, then `outcome`
    ("ready": the server's ready line, "fail": the process exits while loading, "hang": neither)."""

    host: FakeHost
    profile: Profile
    outcome: str = "ready"
    outcomes: list[str] = field(default_factory=list)
    active_state: str = "inactive"
    sub_state: str = "dead"
    main_pid: int = 0
    n_restarts: int = 0
    unit_file_state: str = "disabled"
    journal: list[dict[str, Any]] = field(default_factory=list)
    restarts: int = 0
    # called on every systemctl show: lets a test make the host vanish mid-readiness
    on_show: Callable[[], CommandResult | None] | None = None
    _pids: Iterator[int] = field(default_factory=lambda: itertools.count(4000))
    _cursor: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    _changed: threading.Condition = field(default_factory=threading.Condition)

    def __post_init__(self) -> None:
        self.unit = unit_name(self.profile)
        h = self.host
        h.on(("systemctl", "show", self.unit), self._show)
        h.on(("systemctl", "daemon-reload"), "")
        h.on(("systemctl", "restart", self.unit), self._restart)
        h.on(("systemctl", "stop", self.unit), self._stop)
        h.on(("systemctl", "reset-failed", self.unit), "")
        h.on(("systemctl", "enable", self.unit), self._enable)
        h.on(("systemctl", "is-active", self.unit), lambda argv, _: self.active_state)
        h.on(("journalctl", "-o", "json", "-n", "1", "--no-pager"), self._last_entry)
        h.on(lambda argv: argv[:3] == ("journalctl", "-u", self.unit), self._journal)
        h.on(("mkdir", "-p"), "")
        h.on(("rm", "-f", "--"), self._rm)
        h.on(lambda argv: argv[:2] == ("sh", "-c") and "cp -p" in argv[2], self._keep_copy)
        h.on(("true",), "")
        h.on(
            (self.profile.sglang.python,),
            CommandResult((), 1, "", "ModuleNotFoundError: No module named 'sglang'"),
        )

    # ---- state ------------------------------------------------------------------------------

    def run_now(self) -> None:
        """The service runs (as it would after an earlier deploy)."""
        self.active_state, self.sub_state, self.main_pid = "active", "running", next(self._pids)
        self.unit_file_state = "enabled"

    def log(self, message: str, pid: int | None = None) -> None:
        with self._changed:
            self.journal.append(
                {
                    "__CURSOR": f"c{next(self._cursor)}",
                    "__REALTIME_TIMESTAMP": str(int(time.time() * 1e6)),
                    "MESSAGE": message,
                    "_PID": str(pid or 1),
                    "PRIORITY": "6",
                }
            )
            self._changed.notify_all()

    def _props(self) -> dict[str, str]:
        return {
            "ActiveState": self.active_state,
            "SubState": self.sub_state,
            "NRestarts": str(self.n_restarts),
            "MainPID": str(self.main_pid),
            "ExecMainStatus": "1" if self.active_state == "failed" else "0",
            "Result": "exit-code" if self.active_state == "failed" else "success",
            "LoadState": "loaded",
            "UnitFileState": self.unit_file_state,
            "NeedDaemonReload": "no",
        }

    # ---- handlers ---------------------------------------------------------------------------

    def _show(self, argv: Argv, stdin: bytes | None) -> CommandResult | str:
        if self.on_show is not None:
            override = self.on_show()
            if override is not None:
                return override
        wanted = argv[argv.index("-p") + 1].split(",")
        props = self._props()
        return "".join(f"{key}={props.get(key, '')}\n" for key in wanted)

    def _enable(self, argv: Argv, stdin: bytes | None) -> str:
        self.unit_file_state = "enabled"
        return ""

    def _stop(self, argv: Argv, stdin: bytes | None) -> str:
        self.active_state, self.sub_state, self.main_pid = "inactive", "dead", 0
        return ""

    def _restart(self, argv: Argv, stdin: bytes | None) -> str:
        self.restarts += 1
        if self.main_pid:
            self.log(f"Stopping {self.unit}...")
            self.log(f"Stopped {self.unit}.")
        pid = next(self._pids)
        self.active_state, self.sub_state, self.main_pid = "activating", "start", pid
        self.log(f"Started {self.unit}.")
        outcome = self.outcomes.pop(0) if self.outcomes else self.outcome
        threading.Timer(0.05, self._settle, args=(pid, outcome)).start()
        return ""

    def _settle(self, pid: int, outcome: str) -> None:
        if outcome == "ready":
            self.active_state, self.sub_state = "active", "running"
            self.log(READY_TEXT, pid)
        elif outcome == "fail":
            self.log("RuntimeError: the fake server refuses to load", pid)
            self.active_state, self.sub_state, self.main_pid = "failed", "failed", 0
            self.log("Main process exited, code=exited, status=1/FAILURE")
            self.log("Failed with result 'exit-code'.")

    def _last_entry(self, argv: Argv, stdin: bytes | None) -> str:
        with self._changed:
            return json.dumps(self.journal[-1]) + "\n" if self.journal else ""

    def _after(self, cursor: str | None) -> list[dict[str, Any]]:
        if not cursor:
            return list(self.journal)
        cursors = [entry["__CURSOR"] for entry in self.journal]
        return self.journal[cursors.index(cursor) :] if cursor in cursors else list(self.journal)

    def _journal(self, argv: Argv, stdin: bytes | None) -> str | Iterator[str]:
        cursor = argv[argv.index("--cursor") + 1] if "--cursor" in argv else None
        if "-f" not in argv:
            with self._changed:
                return "".join(json.dumps(entry) + "\n" for entry in self._after(cursor))
        return self._follow(cursor)

    def _follow(self, cursor: str | None) -> Iterator[str]:
        with self._changed:
            sent = len(self.journal) - len(self._after(cursor))
        while not self.host.closed:
            with self._changed:
                fresh = self.journal[sent:]
                sent = len(self.journal)
                if not fresh:
                    self._changed.wait(0.05)
            for entry in fresh:
                yield json.dumps(entry)

    def _rm(self, argv: Argv, stdin: bytes | None) -> str:
        for path in argv[3:]:
            self.host.files.pop(path, None)
        return ""

    def _keep_copy(self, argv: Argv, stdin: bytes | None) -> str:
        source, dest = argv[-2], argv[-1]
        if source in self.host.files:
            self.host.files[dest] = self.host.files[source]
        return ""
