"""One run against a profile's service: its shared state (`DeployRun`) and the opening every command on
a service shares (`open_service`: connect, lock, systemd, then the facts read once).

deploy, rollback, status, `patch apply|revert` and bisect's restore all start here, so the lock holder,
the unit name and path and the step names are the same wherever a host is changed.
"""

from __future__ import annotations

import getpass
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

from k26ctl.deploy.facts import HostFacts, gather_facts
from k26ctl.deploy.history import DeployRecord, append_record, ensure_state_dir, unit_copy_path
from k26ctl.deploy.model import DeployResult
from k26ctl.deploy.plan import sha256_text
from k26ctl.deploy.readiness import ProbeResult, UnitState
from k26ctl.deploy.steps import StepLog
from k26ctl.profile import Profile
from k26ctl.remote import connect as remote_connect
from k26ctl.remote.base import Host
from k26ctl.remote.systemd import Systemd
from k26ctl.render import unit_name, unit_path
from k26ctl.threads import in_thread

# How a run reaches its host: `k26ctl.remote.connect` unless a caller passes another (tests pass a fake).
Connect = Callable[..., Host]


def operator() -> str:
    from k26ctl.inputs import env_text

    return env_text("K26CTL_OPERATOR") or f"{_user_name()}@{socket.gethostname()}"


def _user_name() -> str:
    """The login name; `uid<N>` when there is none (no USER/LOGNAME and no passwd entry: containers,
    systemd units with DynamicUser=)."""
    from k26ctl.jsonsafe import encodable

    try:
        return encodable(getpass.getuser())[0]
    except (KeyError, OSError):
        return f"uid{os.getuid()}"


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


@dataclass
class Snapshot:
    """A host state a rollback can return to."""

    unit_text: str | None
    patches: list[str]

    @property
    def unit_sha(self) -> str | None:
        return sha256_text(self.unit_text) if self.unit_text is not None else None


@dataclass
class DeployRun:
    """Everything one run on a service shares between its steps."""

    profile: Profile
    host: Host
    systemd: Systemd
    unit: str
    unit_path: str
    desired_unit: str
    log: StepLog
    result: DeployResult
    facts: HostFacts | None = None
    applied: bool = False  # the host was changed by this run
    unit_backup: str | None = None
    early_probe: Future[ProbeResult] | None = None
    early_cursor: Future[str] | None = None
    last_unit: UnitState | None = None  # the unit's state as the readiness wait last read it
    restarted: bool = False
    before: Snapshot | None = None  # the host's state before apply (set once the facts are read)
    interrupted_state: str | None = None  # what the read-back after a Ctrl-C found

    def read_facts(self, message: str = "reading the host's state") -> HostFacts:
        """The host's state, read once (as the `facts` step) and kept for the rest of the run."""
        if self.facts is None:
            with self.log.step("facts", message):
                self.facts = gather_facts(self.host, self.systemd, self.profile, self.unit_path)
            problems = self.facts.history_problems
            for problem in problems[:3]:  # what the history is read for (rollback, the last good) skips them
                self.log.emit("warning", f"skipped an unreadable deploy history line: {problem}")
            if len(problems) > 3:
                self.log.emit("warning", f"skipped {len(problems) - 3} more unreadable deploy history lines")
        return self.facts


class EarlyConnection:
    """The host's connection, opened in the background while local work (validation) goes on.

    Its `connect` is what `open_service` calls: it waits for the connection and hands it over, and a
    failure to connect surfaces there, after the local work, as it would have without the head start.
    Connecting reads and changes nothing on the host. `discard` closes a connection nobody took, now or
    whenever it completes (a run that stopped at validation does not wait for a slow host)."""

    def __init__(self, profile: Profile, *, accept_new_host_key: bool, connect: Connect | None) -> None:
        opener = connect or remote_connect
        self._taken = False
        self._mutex = threading.Lock()
        self._future: Future[Host] = in_thread(
            lambda: opener(profile, accept_new_host_key=accept_new_host_key), name="k26ctl-connect"
        )

    def connect(self, profile: Profile, **_: Any) -> Host:
        host = self._future.result()  # a Ctrl-C here leaves it untaken: discard() then closes it
        with self._mutex:
            self._taken = True
        return host

    def discard(self) -> None:
        with self._mutex:
            if self._taken:
                return
            self._taken = True
        self._future.add_done_callback(_close_if_connected)


def _close_if_connected(future: Future[Host]) -> None:
    if future.exception() is None:
        future.result().close()


@contextmanager
def open_service(
    profile: Profile,
    *,
    log: StepLog | None = None,
    result: DeployResult | None = None,
    kind: str = "deploy",
    desired_unit: str = "",
    accept_new_host_key: bool = False,
    lock: bool = True,
    lock_wait: float = 0.0,
    connect: Connect | None = None,
) -> Iterator[DeployRun]:
    """Connect (the `connect` step), take the service's host lock (the `lock` step) unless `lock` is
    False, and yield the run; the connection is closed on the way out. Facts: `run.read_facts()`."""
    log = log if log is not None else StepLog(None)
    unit = unit_name(profile)
    if result is None:
        result = DeployResult(profile=profile.name or "", host="", unit=unit, kind=kind)
    with log.step("connect", "connecting to the host") as handle:
        host = (connect or remote_connect)(profile, accept_new_host_key=accept_new_host_key)
        result.host = host.name
        handle.ok(result.host)
    try:
        held: AbstractContextManager[Any] = (
            host.lock(profile.service.name, holder=operator(), wait=lock_wait) if lock else nullcontext()
        )
        with held:
            if lock:
                log.add("lock", "ok", f"deploy lock for {profile.service.name}")
            yield DeployRun(
                profile, host, Systemd(host, unit), unit, unit_path(profile), desired_unit, log, result
            )
    finally:
        host.close()


def copy_path(profile: Profile, sha: str | None) -> str | None:
    return unit_copy_path(profile.service.name, sha) if sha else None


def write_record(run: DeployRun, record: DeployRecord) -> None:
    service = run.profile.service.name
    with run.log.step("record", "recording the result on the host"):
        current = run.facts.history_raw if run.facts is not None else None
        if current is None:
            ensure_state_dir(run.host, service)
        append_record(run.host, service, record, current=current)
        if run.facts is not None:
            run.facts.history_raw = None  # a second record in this run reads the file again
