"""SSHHost: a Host over one paramiko connection (the only module that imports paramiko).

Honours ~/.ssh/config (HostName, User, Port, IdentityFile, ProxyJump, ProxyCommand,
UserKnownHostsFile), the SSH agent, a connect timeout and keepalives. Host keys are checked against
known_hosts; an unknown key is refused unless accept-new was asked for, a changed key always is.
"""

from __future__ import annotations

import getpass
import logging
import os
import select
import shlex
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from k26ctl.deferred_import import defer_import

defer_import("invoke")  # before paramiko, which imports it only for `Match exec` in ~/.ssh/config

import paramiko  # noqa: E402

from k26ctl.errors import HostKeyError, RemoteCommandError, UnreachableError  # noqa: E402
from k26ctl.remote.shell import Process, ShellHost  # noqa: E402
from k26ctl.threads import in_thread, result_interruptibly  # noqa: E402

# paramiko logs expected failures (a refused forward, a failed auth) as warnings; without a handler
# Python would print them to stderr next to k26ctl's own one-line error
logging.getLogger("paramiko").addHandler(logging.NullHandler())

DEFAULT_SSH_CONFIG = "~/.ssh/config"
DEFAULT_KNOWN_HOSTS = "~/.ssh/known_hosts"
SYSTEM_KNOWN_HOSTS = "/etc/ssh/ssh_known_hosts"
KEEPALIVE_SECONDS = 15
CLOSE_WAIT_SECONDS = 5.0  # a channel's close, before a silent link counts as lost (_close_channel)
# What paramiko raises when the connection under a call is gone (a reset, a closed socket, a dead
# transport); EOFError comes from its packet writer when a send finds the socket broken.
LINK_ERRORS = (paramiko.SSHException, OSError, EOFError)

T = TypeVar("T")


def _shielded(fn: Callable[..., T], *args: Any) -> T:
    """Run a paramiko call where Ctrl-C cannot reach it.

    Python raises KeyboardInterrupt in the main thread between any two bytecodes, including the gap
    between paramiko's `lock.acquire()` and its `try:`. A transport lock left held that way hangs
    every later call on the connection, so after a Ctrl-C during a restart k26ctl could not even
    read back the unit it had left. Signals reach only the main thread: there it merely waits for a
    worker, and the interrupt lands in that wait while the call finishes (or times out) on its own.
    """
    if threading.current_thread() is not threading.main_thread():
        return fn(*args)
    return result_interruptibly(in_thread(fn, *args, name="k26ctl-ssh-call"))


@dataclass
class SSHTarget:
    """Where and how to connect, after ~/.ssh/config has been applied."""

    alias: str
    hostname: str
    port: int = 22
    user: str = field(default_factory=getpass.getuser)
    identity_files: list[str] = field(default_factory=list)
    known_hosts: list[str] = field(default_factory=list)
    proxy_jump: list[str] = field(default_factory=list)
    proxy_command: str | None = None
    use_agent: bool = True

    @property
    def display(self) -> str:
        port = "" if self.port == 22 else f":{self.port}"
        return f"{self.user}@{self.hostname}{port}"

    @property
    def known_hosts_name(self) -> str:
        return self.hostname if self.port == 22 else f"[{self.hostname}]:{self.port}"


def load_ssh_config(path: str | None = None) -> paramiko.SSHConfig:
    config_path = Path(os.path.expanduser(path or os.environ.get("K26CTL_SSH_CONFIG") or DEFAULT_SSH_CONFIG))
    if config_path.is_file():
        return paramiko.SSHConfig.from_path(str(config_path))
    return paramiko.SSHConfig()


def resolve_target(
    alias: str,
    *,
    user: str | None = None,
    port: int | None = None,
    identity_file: str | None = None,
    known_hosts: str | None = None,
    config: paramiko.SSHConfig | None = None,
    use_agent: bool = True,
) -> SSHTarget:
    """Apply ssh_config to an alias; explicit arguments win, like ssh's command-line options."""
    spec_user, _, host_part = alias.rpartition("@") if "@" in alias else ("", "", alias)
    cfg = (config or load_ssh_config()).lookup(host_part)
    identities = [identity_file] if identity_file else list(cfg.get("identityfile", []))
    known = [known_hosts] if known_hosts else cfg.get("userknownhostsfile", DEFAULT_KNOWN_HOSTS).split()
    jumps = cfg.get("proxyjump", "")
    return SSHTarget(
        alias=alias,
        hostname=cfg.get("hostname", host_part),
        port=int(port or cfg.get("port") or 22),
        user=user or spec_user or cfg.get("user") or getpass.getuser(),
        identity_files=[os.path.expanduser(p) for p in identities],
        known_hosts=[os.path.expanduser(p) for p in known],
        proxy_jump=[] if jumps in ("", "none") else [j.strip() for j in jumps.split(",") if j.strip()],
        proxy_command=cfg.get("proxycommand") if cfg.get("proxycommand", "none") != "none" else None,
        use_agent=use_agent,
    )


def _fingerprint(key: paramiko.PKey) -> str:
    return key.fingerprint if hasattr(key, "fingerprint") else key.get_base64()[:16]


class _UnknownHostKey(Exception):
    def __init__(self, hostname: str, key: paramiko.PKey) -> None:
        super().__init__(hostname)
        self.hostname = hostname
        self.key = key


class _RejectUnknown(paramiko.MissingHostKeyPolicy):
    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        raise _UnknownHostKey(hostname, key)


class _AcceptNew(paramiko.MissingHostKeyPolicy):
    """OpenSSH's StrictHostKeyChecking=accept-new: record an unknown key; a changed one still fails."""

    def __init__(self, path: str) -> None:
        self.path = path

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        client.get_host_keys().add(hostname, key.get_name(), key)
        target = Path(self.path)
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        prefix = (
            ""
            if not target.exists() or target.read_bytes().endswith(b"\n") or not target.stat().st_size
            else "\n"
        )
        with target.open("a") as handle:
            handle.write(f"{prefix}{hostname} {key.get_name()} {key.get_base64()}\n")


class _ChannelProcess(Process):
    def __init__(self, channel: paramiko.Channel) -> None:
        self.channel = channel
        self._buffer = b""
        self._stderr = b""
        self._eof = False

    def _pump(self) -> None:
        while self.channel.recv_stderr_ready():
            self._stderr += self.channel.recv_stderr(65536)

    def readline(self, deadline: float | None = None) -> str | None:
        return _shielded(self._readline, deadline)

    def _readline(self, deadline: float | None) -> str | None:
        while b"\n" not in self._buffer and not self._eof:
            wait = 1.0
            if deadline is not None:
                wait = min(wait, deadline - time.monotonic())
                if wait <= 0:
                    raise TimeoutError
            select.select([self.channel], [], [], wait)
            self._pump()
            if self.channel.recv_ready():
                chunk = self.channel.recv(65536)
                if chunk:
                    self._buffer += chunk
                    continue
                self._eof = True
            elif self.channel.eof_received or self.channel.closed:
                self._eof = not self.channel.recv_ready()
        if b"\n" in self._buffer:
            line, self._buffer = self._buffer.split(b"\n", 1)
            return line.decode("utf-8", "replace")
        if self._buffer:
            line, self._buffer = self._buffer, b""
            return line.decode("utf-8", "replace")
        return None

    def send_line(self, line: str) -> bool:
        return _shielded(self._send_line, line)

    def _send_line(self, line: str) -> bool:
        try:
            self.channel.sendall(f"{line}\n".encode())
        except LINK_ERRORS:
            return False
        return True

    def close_stdin(self) -> None:
        _shielded(self._close_stdin)

    def _close_stdin(self) -> None:
        with suppress(*LINK_ERRORS):
            self.channel.shutdown_write()

    def wait(self, timeout: float | None = None) -> int | None:
        return _shielded(self._wait, timeout)

    def _wait(self, timeout: float | None) -> int | None:
        deadline = time.monotonic() + timeout if timeout is not None else None
        while not self.channel.exit_status_ready():
            if deadline is not None and time.monotonic() > deadline:
                return None
            if self.channel.closed:
                break
            self._pump()
            while self.channel.recv_ready():  # drain, so the remote side never blocks on a full window
                self.channel.recv(65536)
            select.select([self.channel], [], [], 0.2)
        self._pump()
        return self.channel.recv_exit_status() if self.channel.exit_status_ready() else -1

    def stderr_text(self) -> str:
        _shielded(self._pump)
        return self._stderr.decode("utf-8", "replace")

    def kill(self) -> None:
        _shielded(_close_channel, self.channel)


class SSHHost(ShellHost):
    def __init__(
        self,
        target: SSHTarget,
        *,
        connect_timeout: float = 10.0,
        command_timeout: float = 120.0,
        accept_new_host_key: bool = False,
        sudo: bool | None = None,
        ssh_config: paramiko.SSHConfig | None = None,
        name: str | None = None,
    ) -> None:
        self.target = target
        self.name = name or target.alias
        self.connect_timeout = connect_timeout
        self.default_timeout = command_timeout
        self.accept_new_host_key = accept_new_host_key
        self.sudo_preference = sudo
        self._ssh_config = ssh_config
        self._client: paramiko.SSHClient | None = None
        self._jump_clients: list[paramiko.SSHClient] = []
        self._conn_lock = threading.Lock()

    # ---- connection -------------------------------------------------------------------------

    def open(self) -> SSHHost:
        self._transport()
        return self

    @property
    def login_is_root(self) -> bool:
        return self.target.user == "root"

    def _transport(self) -> paramiko.Transport:
        with self._conn_lock:
            if self._client is not None:
                transport = self._client.get_transport()
                if transport is not None and transport.is_active():
                    return transport
                self.close()
            self._client = self._connect(self.target, time.monotonic() + self.connect_timeout)
            transport = self._client.get_transport()
            assert transport is not None
            transport.set_keepalive(KEEPALIVE_SECONDS)
            return transport

    def _connect(self, target: SSHTarget, deadline: float) -> paramiko.SSHClient:
        sock = self._open_socket(target, deadline)
        client = paramiko.SSHClient()
        for path in target.known_hosts:
            if Path(path).is_file():
                client.load_host_keys(path)
        uses_default = not target.known_hosts or target.known_hosts[0] == os.path.expanduser(
            DEFAULT_KNOWN_HOSTS
        )
        if uses_default and Path(SYSTEM_KNOWN_HOSTS).is_file():
            client.get_host_keys().load(SYSTEM_KNOWN_HOSTS)
        if self.accept_new_host_key:
            client.set_missing_host_key_policy(_AcceptNew(target.known_hosts[0]))
        else:
            client.set_missing_host_key_policy(_RejectUnknown())
        remaining = max(deadline - time.monotonic(), 0.1)
        try:
            client.connect(
                target.hostname,
                port=target.port,
                username=target.user,
                key_filename=target.identity_files or None,  # type: ignore[arg-type]
                allow_agent=target.use_agent,
                look_for_keys=target.use_agent and not target.identity_files,
                timeout=remaining,
                banner_timeout=remaining,
                auth_timeout=remaining,
                channel_timeout=remaining,
                sock=sock,
            )
        except _UnknownHostKey as exc:
            client.close()
            raise HostKeyError(
                f"{target.display}: unknown host key {exc.key.get_name()} {_fingerprint(exc.key)}; refusing",
                "check the fingerprint with the host's admin, then re-run with --accept-new-host-key "
                f"(records it in {target.known_hosts[0]})",
            ) from None
        except paramiko.BadHostKeyException as exc:
            client.close()
            raise HostKeyError(
                f"{target.display}: host key CHANGED (known {_fingerprint(exc.expected_key)}, "
                f"offered {_fingerprint(exc.key)}); refusing: it may be an impostor",
                f"if the host was reinstalled, remove the old key: ssh-keygen -R {target.known_hosts_name} "
                f"-f {target.known_hosts[0]}",
            ) from None
        except paramiko.AuthenticationException as exc:
            client.close()
            tried = ", ".join(target.identity_files) or (
                "agent and default keys" if target.use_agent else "none"
            )
            raise UnreachableError(
                f"{target.display}: authentication failed ({exc}; keys tried: {tried})",
                "check User/IdentityFile in ~/.ssh/config or the profile's host.user/host.identity_file",
            ) from None
        except LINK_ERRORS as exc:
            client.close()
            raise UnreachableError(
                f"{target.display}: SSH handshake failed: {_describe(exc)}",
                "check that sshd runs on the host and the address/port are right",
            ) from None
        return client

    def _open_socket(self, target: SSHTarget, deadline: float) -> socket.socket | paramiko.Channel:
        remaining = max(deadline - time.monotonic(), 0.1)
        if target.proxy_jump:
            return self._jump_channel(target, deadline)
        if target.proxy_command:
            return paramiko.ProxyCommand(target.proxy_command)  # type: ignore[return-value]
        try:
            sock = socket.create_connection((target.hostname, target.port), timeout=remaining)
        except TimeoutError:
            raise UnreachableError(
                f"{target.display}: connection timed out after {self.connect_timeout:g} s",
                "check the address, the network path and host.connect_timeout",
            ) from None
        except OSError as exc:
            raise UnreachableError(
                f"{target.display}: cannot connect: {_describe(exc)}",
                "check the address and port, and that sshd runs on the host",
            ) from None
        # Every command opens a channel: small packets each way, which Nagle's algorithm holds back
        # until the peer's delayed ACK (about 40 ms per round trip on Linux).
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def _jump_channel(self, target: SSHTarget, deadline: float) -> paramiko.Channel:
        config = self._ssh_config or load_ssh_config()
        jump_spec = target.proxy_jump[-1]
        user, _, rest = jump_spec.rpartition("@")
        host, _, port = rest.partition(":")
        jump = resolve_target(host, user=user or None, port=int(port) if port else None, config=config)
        jump.proxy_jump = target.proxy_jump[:-1]
        jump_client = self._connect(jump, deadline)
        self._jump_clients.append(jump_client)
        transport = jump_client.get_transport()
        assert transport is not None
        try:
            return transport.open_channel(
                "direct-tcpip",
                (target.hostname, target.port),
                ("127.0.0.1", 0),
                timeout=max(deadline - time.monotonic(), 0.1),
            )
        except (paramiko.SSHException, OSError) as exc:
            raise UnreachableError(
                f"{target.display}: jump host {jump.display} cannot reach it: {_describe(exc)}",
                "check ProxyJump in ~/.ssh/config",
            ) from None

    def abandon(self) -> None:
        # The kernel keeps sending a closed socket's queued bytes once the link is back, so a
        # given-up upload could still complete on the host minutes later; a reset drops them.
        for client in [self._client, *self._jump_clients]:
            transport = client.get_transport() if client is not None else None
            sock = getattr(transport, "sock", None)
            if isinstance(sock, socket.socket):
                _reset_on_close(sock)
        self.close()

    def close(self) -> None:
        for client in [self._client, *reversed(self._jump_clients)]:
            if client is not None:
                client.close()
        self._client = None
        self._jump_clients = []

    # ---- transport for ShellHost ------------------------------------------------------------

    def _channel(self, command: str, timeout: float | None = None) -> paramiko.Channel:
        transport = self._transport()
        # The open request queues behind whatever the connection is already carrying, so on a slow
        # or lossy link it is bounded like the command itself, not like the TCP handshake.
        open_timeout = max(timeout or self.default_timeout, self.connect_timeout)
        try:
            channel = transport.open_session(timeout=open_timeout)
            channel.exec_command(command)
        except LINK_ERRORS as exc:
            raise UnreachableError(f"{self.name}: SSH connection lost: {_describe(exc)}") from None
        return channel

    def _exec(
        self, argv: Sequence[str], *, stdin: bytes | None, timeout: float | None
    ) -> tuple[int, bytes, bytes]:
        return _shielded(self._exec_shielded, argv, stdin, timeout)

    def _exec_shielded(
        self, argv: Sequence[str], stdin: bytes | None, timeout: float | None
    ) -> tuple[int, bytes, bytes]:
        # Without input the command reads /dev/null on the host and no EOF is sent: paramiko sends a
        # shutdown_write() EOF after releasing the channel's lock, so a command that exits at once
        # can have its channel closed first, and sshd drops the whole connection on an EOF for a
        # channel it has freed ("ieof packet referred to nonexistent channel").
        command = argv if stdin is not None else ["sh", "-c", 'exec "$@" </dev/null', "k26ctl", *argv]
        channel = self._channel(shlex.join(command), timeout)
        sender = None
        if stdin is not None:
            sender = threading.Thread(target=_send_all, args=(channel, stdin), daemon=True)
            sender.start()
        out: list[bytes] = []
        err: list[bytes] = []
        deadline = time.monotonic() + timeout if timeout else None
        while True:
            if channel.recv_ready():
                out.append(channel.recv(65536))
                continue
            if channel.recv_stderr_ready():
                err.append(channel.recv_stderr(65536))
                continue
            if channel.exit_status_ready() and (channel.eof_received or channel.closed):
                break
            if channel.closed:
                break
            if deadline is not None and time.monotonic() > deadline:
                _close_channel(channel)
                raise RemoteCommandError(
                    f"{self.name}: `{' '.join(argv[:3])}` timed out after {timeout:g} s",
                    "raise host.command_timeout or check the host",
                    returncode=124,
                )
            select.select([channel], [], [], 0.5)
        if sender is not None:
            sender.join(timeout=5)
        # -1: no exit status came back, either the command died of a signal (paramiko does not keep
        # which) or the connection itself is gone
        rc = channel.recv_exit_status() if channel.exit_status_ready() else -1
        _close_channel(channel)
        transport = channel.get_transport()
        if rc == -1 and (transport is None or not transport.is_active()):
            raise UnreachableError(
                f"{self.name}: SSH connection lost while running `{' '.join(argv[:3])}`",
                "check the host; the command may or may not have completed",
            )
        return rc, b"".join(out), b"".join(err)

    def _spawn(self, argv: Sequence[str]) -> Process:
        return _ChannelProcess(_shielded(self._channel, shlex.join(argv)))

    # ---- port forward -----------------------------------------------------------------------

    def forward(self, remote_host: str, remote_port: int) -> AbstractContextManager[tuple[str, int]]:
        return self._forward(remote_host, remote_port)

    @contextmanager
    def _forward(self, remote_host: str, remote_port: int) -> Iterator[tuple[str, int]]:
        self._transport()  # connect now, so an unreachable host fails here
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        stop = threading.Event()

        def serve() -> None:
            while not stop.is_set():
                ready, _, _ = select.select([listener], [], [], 0.2)
                if not ready:
                    continue
                try:
                    conn, peer = listener.accept()
                except OSError:
                    return
                try:
                    # The connection of the moment: if it dropped, the next forwarded connection
                    # reconnects (as commands do) instead of failing for the life of the forward.
                    chan = self._transport().open_channel(
                        "direct-tcpip", (remote_host, remote_port), peer, timeout=10
                    )
                except (*LINK_ERRORS, UnreachableError):
                    conn.close()
                    continue
                threading.Thread(target=_pipe, args=(conn, chan, stop), daemon=True).start()

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        try:
            yield listener.getsockname()[:2]
        finally:
            stop.set()
            with suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)  # wakes the accept loop now, not at its next poll
            thread.join(timeout=2)
            listener.close()


def _send_all(channel: paramiko.Channel, data: bytes) -> None:
    try:
        view = memoryview(data)
        while view:
            sent = channel.send(bytes(view[:32768]))
            if sent <= 0:
                return
            view = view[sent:]
        channel.shutdown_write()
    except LINK_ERRORS:
        pass


def _pipe(conn: socket.socket, chan: paramiko.Channel, stop: threading.Event) -> None:
    try:
        while not stop.is_set():
            ready = select.select([conn.fileno(), chan.fileno()], [], [], 0.2)[0]
            if conn.fileno() in ready:
                data = conn.recv(65536)
                if not data:
                    break
                chan.sendall(data)
            if chan.fileno() in ready:
                data = chan.recv(65536)
                if not data:
                    break
                conn.sendall(data)
    except LINK_ERRORS:
        pass
    finally:
        _close_channel(chan)
        conn.close()


def _close_channel(channel: paramiko.Channel) -> None:
    """Close a channel whose work is over. paramiko sends the close message at once and raises
    EOFError when the connection broke in the meantime (a reset its reader thread has not seen yet):
    what the channel carried is already known, and the next call on the connection finds the break.

    Over a link that went silent (no reset) with a full send buffer, that message cannot be written
    until TCP gives up, minutes later. The close gets CLOSE_WAIT_SECONDS; then the connection is
    taken as lost and its socket shut, which ends every write blocked on it. The socket is set to
    reset on close first (as in SSHHost.abandon): a shutdown alone queues its FIN behind the unsent
    bytes, which the kernel still delivers once the link is back, so an upload given up on here could
    complete on the host after k26ctl said it had not."""
    closer = threading.Thread(target=_close_quietly, args=(channel,), daemon=True)
    closer.start()
    closer.join(CLOSE_WAIT_SECONDS)
    if closer.is_alive():
        transport = channel.get_transport()
        sock = getattr(transport, "sock", None)
        if isinstance(sock, socket.socket):
            _reset_on_close(sock)
            with suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


def _reset_on_close(sock: socket.socket) -> None:
    """Linger 0: closing the socket sends a reset and drops whatever is still queued to send."""
    with suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def _close_quietly(channel: paramiko.Channel) -> None:
    with suppress(*LINK_ERRORS):
        channel.close()


def _describe(exc: BaseException) -> str:
    if isinstance(exc, paramiko.ssh_exception.NoValidConnectionsError):
        return "; ".join(
            f"{addr[0]}:{addr[1]}: {getattr(err, 'strerror', None) or err}"
            for addr, err in exc.errors.items()
        )
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]
