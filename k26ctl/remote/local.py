"""LocalHost: this machine as a Host, with the same file, lock and sudo behaviour as SSHHost."""

from __future__ import annotations

import getpass
import os
import queue
import socket
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress

from k26ctl.errors import RemoteCommandError
from k26ctl.remote.shell import Process, ShellHost


class _PopenProcess(Process):
    def __init__(self, argv: Sequence[str]) -> None:
        self.proc = subprocess.Popen(
            list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        self._stderr = b""
        self._reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._reader.start()
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        self._stdout_reader = threading.Thread(target=self._read_stdout, daemon=True)
        self._stdout_reader.start()

    def _read_stdout(self) -> None:
        stream = self.proc.stdout
        assert stream is not None
        for line in iter(stream.readline, b""):
            self._lines.put(line)
        self._lines.put(None)

    def _read_stderr(self) -> None:
        stream = self.proc.stderr
        assert stream is not None
        for chunk in iter(lambda: stream.read(4096), b""):
            self._stderr += chunk

    def readline(self, deadline: float | None = None) -> str | None:
        timeout = None if deadline is None else max(deadline - time.monotonic(), 0.0)
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError from None
        if line is None:
            self._lines.put(None)  # EOF stays EOF for later calls
            return None
        return line.rstrip(b"\n").decode("utf-8", "replace")

    def send_line(self, line: str) -> bool:
        stdin = self.proc.stdin
        if stdin is None or stdin.closed:
            return False
        try:
            stdin.write(f"{line}\n".encode())
            stdin.flush()
        except (OSError, ValueError):  # the process ended, or stdin was closed under us
            return False
        return True

    def close_stdin(self) -> None:
        if self.proc.stdin and not self.proc.stdin.closed:
            with suppress(OSError):
                self.proc.stdin.close()

    def wait(self, timeout: float | None = None) -> int | None:
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        self._reader.join(timeout=1)
        self._stdout_reader.join(timeout=1)
        return rc

    def stderr_text(self) -> str:
        return self._stderr.decode("utf-8", "replace")

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()


class LocalHost(ShellHost):
    def __init__(
        self, *, command_timeout: float = 120.0, sudo: bool | None = None, name: str = "local"
    ) -> None:
        self.name = name
        self.default_timeout = command_timeout
        self.sudo_preference = sudo

    @property
    def login_is_root(self) -> bool:
        return os.geteuid() == 0

    @property
    def user(self) -> str:
        return getpass.getuser()

    @property
    def user_manager(self) -> bool:
        """True when units should go to this user's own systemd (`systemctl --user`): not root, and
        a user manager runs (a workstation session, or lingering)."""
        if os.geteuid() == 0:
            return False
        runtime = os.environ.get("XDG_RUNTIME_DIR") or f"/run/user/{os.geteuid()}"
        return os.path.exists(os.path.join(runtime, "systemd", "private"))

    def _exec(
        self, argv: Sequence[str], *, stdin: bytes | None, timeout: float | None
    ) -> tuple[int, bytes, bytes]:
        try:
            proc = subprocess.run(
                list(argv),
                input=stdin,
                stdin=None if stdin is not None else subprocess.DEVNULL,
                capture_output=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise RemoteCommandError(
                f"{self.name}: `{' '.join(argv[:3])}` timed out after {timeout:g} s", returncode=124
            ) from None
        except FileNotFoundError as exc:
            return 127, b"", f"{argv[0]}: not found ({exc.strerror})".encode()
        return proc.returncode, proc.stdout, proc.stderr

    def _spawn(self, argv: Sequence[str]) -> Process:
        return _PopenProcess(argv)

    def forward(self, remote_host: str, remote_port: int) -> AbstractContextManager[tuple[str, int]]:
        return _direct(remote_host, remote_port)


@contextmanager
def _direct(remote_host: str, remote_port: int) -> Iterator[tuple[str, int]]:
    """Nothing to tunnel: the address as seen from this machine is the address to use."""
    host = "127.0.0.1" if remote_host in ("localhost", "0.0.0.0", "") else remote_host
    socket.getaddrinfo(host, remote_port)  # fail early on a name that does not resolve
    yield host, remote_port
