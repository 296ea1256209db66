"""FakeHost: a `Host` that runs nothing, for fast in-process tests of the layers above the transport.

Files live in a dict, every argv is recorded in `executed`, and commands are answered by handlers
registered with `on(...)`: the first whose matcher accepts the argv answers it. `run` and `stream`
funnel through the same handlers, so one registration drives both (pyinfra's fake connector and
httpx's mock transport work the same way). An argv nobody answers fails with exit 127 and says so.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from k26ctl.errors import LockHeldError, RemoteCommandError, UnreachableError
from k26ctl.remote.base import CommandResult, Host, LockInfo, WriteResult

Argv = tuple[str, ...]
Matcher = Callable[[Argv], bool]
# A handler answers with a CommandResult, or with stdout text (exit 0), or with lines for `stream`.
Answer = CommandResult | str | list[str] | Iterator[str]
Handler = Callable[[Argv, bytes | None], Answer]


def prefix(*words: str) -> Matcher:
    """Matches an argv that starts with `words`."""
    return lambda argv: argv[: len(words)] == words


@dataclass
class _Registration:
    matches: Matcher
    handler: Handler


class FakeHost(Host):
    """An in-memory host. `forward` yields `forward_to` (e.g. an in-process HTTP server), or raises
    UnreachableError when it is None."""

    def __init__(self, name: str = "fake host", *, forward_to: tuple[str, int] | None = None) -> None:
        self.name = name
        self.forward_to = forward_to
        self.files: dict[str, bytes] = {}
        self.modes: dict[str, int] = {}
        self.executed: list[Argv] = []
        self.locks_taken: list[tuple[str, str]] = []  # (lock name, holder), in order
        self.closed = False
        self._handlers: list[_Registration] = []
        self._held: dict[str, LockInfo] = {}
        self._mutex = threading.Lock()

    # ---- scripting ----------------------------------------------------------------------------

    def on(self, matches: Matcher | Sequence[str], handler: Handler | Answer) -> None:
        """Answer argvs accepted by `matches` (a matcher, or an argv prefix) with `handler`: a
        callable `(argv, stdin) -> answer`, or a fixed answer. Later registrations take precedence."""
        matcher = matches if callable(matches) else prefix(*matches)
        if callable(handler):
            fn = handler
        else:
            fixed = handler

            def fn(argv: Argv, stdin: bytes | None) -> Answer:
                return fixed

        self._handlers.insert(0, _Registration(matcher, fn))

    def _answer(self, argv: Argv, stdin: bytes | None) -> Answer:
        with self._mutex:
            self.closed = False  # used again after close(): reconnected, as SSHHost does
            self.executed.append(argv)
            handlers = list(self._handlers)
        for registration in handlers:
            if registration.matches(argv):
                return registration.handler(argv, stdin)
        return CommandResult(argv, 127, "", f"fake host: nothing answers {' '.join(argv)}")

    def ran(self, *words: str) -> list[Argv]:
        """The recorded argvs that start with `words`."""
        with self._mutex:
            return [argv for argv in self.executed if argv[: len(words)] == words]

    # ---- Host ---------------------------------------------------------------------------------

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
        args = tuple(argv)
        answer = self._answer(args, stdin)
        if isinstance(answer, CommandResult):
            result = answer
        elif isinstance(answer, str):
            result = CommandResult(args, 0, answer, "")
        else:
            result = CommandResult(args, 0, "".join(f"{line}\n" for line in answer), "")
        if check and not result.ok:
            raise RemoteCommandError(
                f"{self.name}: {' '.join(args)} failed (exit {result.returncode})",
                returncode=result.returncode,
                stderr=result.stderr,
            )
        return result

    def stream(
        self, argv: Sequence[str], *, sudo: bool = False, timeout: float | None = None
    ) -> Iterator[str]:
        args = tuple(argv)
        answer = self._answer(args, None)
        if isinstance(answer, CommandResult):
            if not answer.ok:
                raise RemoteCommandError(
                    f"{self.name}: {' '.join(args)} failed (exit {answer.returncode})",
                    returncode=answer.returncode,
                    stderr=answer.stderr,
                )
            return iter(answer.stdout.splitlines())
        if isinstance(answer, str):
            return iter(answer.splitlines())
        return iter(answer)

    def read_file(self, path: str, *, sudo: bool = False) -> bytes | None:
        with self._mutex:
            return self.files.get(path)

    def write_file_atomic(
        self,
        path: str,
        data: bytes,
        *,
        mode: int | None = None,
        sudo: bool = False,
        backup: bool = True,
    ) -> WriteResult:
        with self._mutex:
            old = self.files.get(path)
            backup_path = None
            if backup and old is not None and old != data:
                backup_path = f"{path}.bak.{len(self.executed)}"
                self.files[backup_path] = old
            self.files[path] = data
            if mode is not None:
                self.modes[path] = mode
        return WriteResult(path, old != data, backup_path, hashlib.sha256(data).hexdigest())

    def sha256(self, path: str, *, sudo: bool = False) -> str | None:
        data = self.read_file(path)
        return hashlib.sha256(data).hexdigest() if data is not None else None

    @contextmanager
    def lock(self, name: str, *, holder: str, wait: float = 0.0) -> Iterator[LockInfo]:
        with self._mutex:
            held = self._held.get(name)
            if held is not None:
                raise LockHeldError(
                    f"{self.name}: {name} is locked by {held.holder} since {held.since}",
                    "wait for the other run to finish",
                )
            info = self._held[name] = LockInfo(holder, "now")
            self.locks_taken.append((name, holder))
        try:
            yield info
        finally:
            with self._mutex:
                self._held.pop(name, None)

    def held_locks(self) -> list[str]:
        with self._mutex:
            return sorted(self._held)

    @contextmanager
    def forward(self, remote_host: str, remote_port: int) -> Iterator[tuple[str, int]]:
        if self.forward_to is None:
            raise UnreachableError(f"{self.name}: nothing listens on {remote_host}:{remote_port}")
        yield self.forward_to

    def close(self) -> None:
        self.closed = True
