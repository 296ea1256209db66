"""What SSH and local hosts share: files, checksums and locks done by small sh programs on the host.

A subclass provides only the transport: `_exec` (run an argv to completion) and `_spawn` (a process
whose stdout is read line by line and whose stdin can be closed). Everything else is the same code
on both, so the local host behaves exactly like a remote one.
"""

from __future__ import annotations

import abc
import hashlib
import math
import os
import re
import secrets
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime, timezone

from k26ctl.errors import ConfigError, LockHeldError, PermissionDeniedError, RemoteCommandError
from k26ctl.remote import scripts
from k26ctl.remote.base import CommandResult, Host, LockInfo, WriteResult

_ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_LOCK_NAME = re.compile(r"^[A-Za-z0-9_.@:-]+$")
LOCK_DIR = "/run/lock"
# A held lock lives only while its client keeps sending heartbeats: a client that vanished without
# closing its connection (its link went down) frees the lock within the lease, not when the host's
# sshd finally gives up on the session (TCP keepalive: hours).
DEFAULT_LOCK_LEASE = 45.0
MIN_LOCK_LEASE = 1.0
LOCK_LEASE_ENV = "K26CTL_LOCK_LEASE"
HEARTBEAT_EVERY = 5.0  # at most; shorter leases beat four times per lease


class Process(abc.ABC):
    """A running command: stdout lines as they come, stdin that can be closed, an exit code."""

    @abc.abstractmethod
    def readline(self, deadline: float | None = None) -> str | None:
        """The next stdout line without its newline, or None at EOF; TimeoutError once
        time.monotonic() passes `deadline` without a complete line."""

    @abc.abstractmethod
    def send_line(self, line: str) -> bool:
        """Write one line to its stdin; False when stdin is gone (process ended, connection lost)."""

    @abc.abstractmethod
    def close_stdin(self) -> None: ...

    @abc.abstractmethod
    def wait(self, timeout: float | None = None) -> int | None:
        """The exit code, or None if it has not exited within timeout."""

    @abc.abstractmethod
    def stderr_text(self) -> str: ...

    @abc.abstractmethod
    def kill(self) -> None: ...


class ShellHost(Host):
    name: str = "host"
    default_timeout: float = 120.0

    # ---- transport (subclasses) --------------------------------------------------------------

    @abc.abstractmethod
    def _exec(
        self, argv: Sequence[str], *, stdin: bytes | None, timeout: float | None
    ) -> tuple[int, bytes, bytes]:
        """Run the final argv (already wrapped for sudo/env); (exit code, stdout, stderr)."""

    @abc.abstractmethod
    def _spawn(self, argv: Sequence[str]) -> Process: ...

    @property
    @abc.abstractmethod
    def login_is_root(self) -> bool: ...

    sudo_preference: bool | None = None  # None: sudo when the login user is not root

    # ---- argv building ----------------------------------------------------------------------

    def _wrap(self, argv: Sequence[str], *, sudo: bool, env: dict[str, str] | None = None) -> list[str]:
        if not argv:
            raise ValueError("empty argv")
        full: list[str] = []
        if env:
            for key in env:
                if not _ENV_KEY.match(key):
                    raise ValueError(f"bad environment variable name {key!r}")
            full += ["env", *[f"{k}={v}" for k, v in env.items()]]
        full += list(argv)
        if sudo and self._use_sudo():
            full = ["sudo", "-n", "--", *full]
        return full

    def _use_sudo(self) -> bool:
        if self.sudo_preference is not None:
            return self.sudo_preference
        return not self.login_is_root

    def _check_sudo(self, argv: Sequence[str], rc: int, stderr: str) -> None:
        if not argv or argv[0] != "sudo" or rc == 0:
            return
        low = stderr.lower()
        if "password is required" in low or "terminal is required" in low or "askpass" in low:
            raise PermissionDeniedError(
                f"{self.name}: sudo asks for a password for `{' '.join(argv[3:5])}`",
                "allow passwordless sudo for this user (NOPASSWD in sudoers), or log in as root",
            )
        if rc == 127 and "sudo" in low and "not found" in low:
            raise PermissionDeniedError(
                f"{self.name}: this needs root, the login user is not root and sudo is not installed",
                "install sudo on the host or log in as root",
            )
        if "not in the sudoers" in low or "not allowed to execute" in low:
            raise PermissionDeniedError(f"{self.name}: sudo refused: {stderr.strip()}", "check sudoers")

    # ---- commands ---------------------------------------------------------------------------

    def run(
        self,
        argv: Sequence[str],
        *,
        sudo: bool = False,
        check: bool = False,
        timeout: float | None = None,
        env: dict[str, str] | None = None,
        stdin: bytes | None = None,
    ) -> CommandResult:
        full = self._wrap(argv, sudo=sudo, env=env)
        started = time.monotonic()
        rc, out, err = self._exec(full, stdin=stdin, timeout=timeout or self.default_timeout)
        stderr = err.decode("utf-8", "replace")
        self._check_sudo(full, rc, stderr)
        result = CommandResult(
            argv=tuple(argv),
            returncode=rc,
            stdout=out.decode("utf-8", "replace"),
            stderr=stderr,
            seconds=time.monotonic() - started,
        )
        if check and not result.ok:
            raise _command_error(self.name, argv, rc, stderr)
        return result

    def stream(
        self, argv: Sequence[str], *, sudo: bool = False, timeout: float | None = None
    ) -> Iterator[str]:
        """Lines of argv's stdout as they come. With `timeout` the stream ends after that many
        seconds even while no line arrives; closing the iterator stops the command on the host."""
        full = self._wrap(scripts.sh(scripts.UNTIL_STDIN_EOF, *argv), sudo=sudo)
        proc = self._spawn(full)
        deadline = time.monotonic() + timeout if timeout else None
        finished = False
        try:
            while True:
                try:
                    line = proc.readline(deadline)
                except TimeoutError:
                    return  # the caller's time is up: stop quietly, the command is stopped below
                if line is None:
                    break
                yield line
            finished = True
        finally:
            proc.close_stdin()
            rc = proc.wait(timeout=5)
            if rc is None:
                proc.kill()
            elif finished and rc != 0:
                stderr = proc.stderr_text()
                self._check_sudo(full, rc, stderr)
                raise _command_error(self.name, argv, rc, stderr)

    # ---- files ------------------------------------------------------------------------------

    def read_file(self, path: str, *, sudo: bool = False) -> bytes | None:
        rc, out, err = self._exec(
            self._wrap(scripts.sh(scripts.READ, path), sudo=sudo), stdin=None, timeout=None
        )
        if rc == scripts.MISSING:
            return None
        self._check_sudo(["sudo"] if sudo and self._use_sudo() else [], rc, err.decode("utf-8", "replace"))
        if rc != 0:
            raise _command_error(self.name, ["cat", path], rc, err.decode("utf-8", "replace"))
        return out

    def sha256(self, path: str, *, sudo: bool = False) -> str | None:
        res = self.run(scripts.sh(scripts.SHA256, path), sudo=sudo)
        if res.returncode == scripts.MISSING:
            return None
        if not res.ok:
            raise _command_error(self.name, ["sha256sum", path], res.returncode, res.stderr)
        return res.stdout.strip()

    def write_file_atomic(
        self,
        path: str,
        data: bytes,
        *,
        mode: int | None = None,
        sudo: bool = False,
        backup: bool = True,
    ) -> WriteResult:
        if not path.startswith("/"):
            raise ValueError(f"write_file_atomic needs an absolute path, got {path!r}")
        digest = hashlib.sha256(data).hexdigest()
        directory, base = os.path.split(path)
        tmp = f"{directory}/.{base}.k26ctl-tmp-{secrets.token_hex(4)}"
        backup_path = None
        if backup:  # made by the script only when it replaces an existing file
            stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
            backup_path = f"{path}.k26ctl-backup-{stamp}"
        # One round trip: the script itself leaves a file that already holds the content alone.
        argv = scripts.sh(scripts.WRITE, path, tmp, digest, backup_path or "", f"{mode:o}" if mode else "")
        res = self.run(argv, sudo=sudo, stdin=data)
        if not res.ok:
            raise _command_error(self.name, ["write", path], res.returncode, res.stderr)
        outcome = (res.stdout.split() or [""])[-1]
        if outcome == "unchanged":
            return WriteResult(path=path, changed=False, backup_path=None, sha256=digest)
        kept = backup_path if outcome == "replaced" else None
        return WriteResult(path=path, changed=True, backup_path=kept, sha256=digest)

    # ---- lock -------------------------------------------------------------------------------

    def lock(
        self, name: str, *, holder: str, wait: float = 0.0, lease: float | None = None
    ) -> AbstractContextManager[LockInfo]:
        """The host-side flock `name`, held while heartbeats reach the host; `lease` (default
        $K26CTL_LOCK_LEASE, else DEFAULT_LOCK_LEASE) is how long the host waits for one before it
        frees the lock of a client that vanished. Leaving the block frees it at once."""
        if not _LOCK_NAME.match(name):
            raise ValueError(f"bad lock name {name!r}")
        return self._lock(name, holder, wait, lock_lease(lease))

    @contextmanager
    def _lock(self, name: str, holder: str, wait: float, lease: float) -> Iterator[LockInfo]:
        lock_file = f"{LOCK_DIR}/k26ctl-{name}.lock"
        info_file = f"{LOCK_DIR}/k26ctl-{name}.holder"
        argv = scripts.sh(scripts.LOCK, lock_file, info_file, holder, f"{wait:g}", f"{lease:g}")
        proc = self._spawn(self._wrap(argv, sudo=False))
        first = proc.readline()
        if first != "LOCKED":
            lines = []
            while (line := proc.readline()) is not None:
                lines.append(line)
            rc = proc.wait(timeout=5)
            info = _parse_fields(lines)
            if first == "BUSY":
                raise _lock_held(self.name, name, info)
            raise _command_error(
                self.name, ["flock", lock_file], rc if rc is not None else 1, proc.stderr_text()
            )
        fields = _parse_fields([line for _ in range(4) if (line := proc.readline()) is not None])
        lock_info = LockInfo(
            holder=holder,
            since=fields.get("since", ""),
            extra={
                "pid": fields.get("pid", ""),
                "login": fields.get("login", ""),
                "file": lock_file,
                "lease": fields.get("lease", f"{lease:g}"),
            },
        )
        stop = threading.Event()
        beats = threading.Thread(
            target=_heartbeats, args=(proc, heartbeat_interval(lease), stop), daemon=True
        )
        beats.start()
        try:
            yield lock_info
        finally:
            stop.set()
            beats.join(timeout=2)  # a send stuck on a dead link must not hold up the release
            proc.close_stdin()
            if proc.wait(timeout=10) is None:
                proc.kill()


def lock_lease(value: float | None = None) -> float:
    """The lock lease in seconds: `value`, else $K26CTL_LOCK_LEASE, else DEFAULT_LOCK_LEASE."""
    shown = f"lease={value!r}"
    if value is None:
        raw = os.environ.get(LOCK_LEASE_ENV, "").strip()
        if not raw:
            return DEFAULT_LOCK_LEASE
        shown = f"{LOCK_LEASE_ENV}={raw!r}"
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
    if not (math.isfinite(value) and value >= MIN_LOCK_LEASE):
        raise ConfigError(
            f"{shown} is not a lock lease (seconds, at least {MIN_LOCK_LEASE:g})",
            f"unset {LOCK_LEASE_ENV} or give e.g. {DEFAULT_LOCK_LEASE:g}",
        )
    return value


def heartbeat_interval(lease: float) -> float:
    return min(HEARTBEAT_EVERY, lease / 4)


def _heartbeats(proc: Process, every: float, stop: threading.Event) -> None:
    while not stop.wait(every):
        if not proc.send_line("beat"):
            return


def _lock_held(host: str, name: str, info: dict[str, str]) -> LockHeldError:
    who = info.get("holder", "an unknown holder")
    since = info.get("since", "an unknown time")
    where = f" (pid {info['pid']} as {info['login']})" if "pid" in info and "login" in info else ""
    expiry = (
        f"; if its client died or lost its link, the lock expires within {info['lease']} s"
        if info.get("lease")
        else ""
    )
    return LockHeldError(
        f"{host}: lock '{name}' is held by {who}{where} since {since}{expiry}",
        "wait for that operation to finish; the lock is freed when it ends or stops answering",
    )


def _parse_fields(lines: list[str]) -> dict[str, str]:
    out = {}
    for line in lines:
        key, sep, value = line.partition("=")
        if sep:
            out[key] = value
    return out


def _command_error(host: str, argv: Sequence[str], rc: int, stderr: str) -> RemoteCommandError:
    tail = stderr.strip().splitlines()[-1] if stderr.strip() else "no error output"
    shown = " ".join(argv[:3]) + (" ..." if len(argv) > 3 else "")
    return RemoteCommandError(
        f"{host}: `{shown}` exited with {rc}: {tail}",
        "see the command's output above or run it by hand on the host",
        returncode=rc,
        stderr=stderr,
    )
