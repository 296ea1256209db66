"""The `Host` interface every operation goes through: commands from an argv, files, locks.

Implementations: `k26ctl.remote.ssh.SSHHost` (paramiko) and `k26ctl.remote.local.LocalHost`.
Callers never build shell strings: they pass argv lists, and the implementation quotes them.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field


@dataclass(frozen=True)
class CommandResult:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.returncode == 0


@dataclass(frozen=True)
class WriteResult:
    path: str
    changed: bool
    backup_path: str | None
    sha256: str


@dataclass(frozen=True)
class LockInfo:
    holder: str
    since: str
    extra: dict[str, str] = field(default_factory=dict)


class Host(abc.ABC):
    """A machine k26ctl acts on. One connection is reused for the whole life of the object."""

    name: str

    @abc.abstractmethod
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
        """Run argv on the host; with check=True a non-zero exit raises RemoteCommandError."""

    @abc.abstractmethod
    def stream(
        self, argv: Sequence[str], *, sudo: bool = False, timeout: float | None = None
    ) -> Iterator[str]:
        """Run argv and yield its stdout line by line as it arrives (journal follow, long jobs)."""

    @abc.abstractmethod
    def read_file(self, path: str, *, sudo: bool = False) -> bytes | None:
        """The file's bytes, or None when it does not exist."""

    @abc.abstractmethod
    def write_file_atomic(
        self,
        path: str,
        data: bytes,
        *,
        mode: int | None = None,
        sudo: bool = False,
        backup: bool = True,
    ) -> WriteResult:
        """Temp file in the same directory, fsync, rename; keep mode/owner; timestamped backup."""

    @abc.abstractmethod
    def sha256(self, path: str, *, sudo: bool = False) -> str | None:
        """Hex digest of the file, or None when it does not exist."""

    @abc.abstractmethod
    def lock(self, name: str, *, holder: str, wait: float = 0.0) -> AbstractContextManager[LockInfo]:
        """A host-side flock; raises LockHeldError naming the holder and since when."""

    @abc.abstractmethod
    def forward(self, remote_host: str, remote_port: int) -> AbstractContextManager[tuple[str, int]]:
        """Make remote_host:remote_port (as seen from the host) reachable from here; yields the local
        (address, port) to connect to. SSH: a port forward over the existing connection."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release the connection."""

    def abandon(self) -> None:
        """Drop a connection given up for lost: nothing still queued for the host may reach it
        later (an upload cut in the middle stays cut even when the link comes back)."""
        self.close()

    def __enter__(self) -> Host:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
