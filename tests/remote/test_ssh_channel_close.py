"""A command whose exit status came back keeps its result when closing its channel finds the
connection broken: paramiko sends the close message at once and raises EOFError from its packet
writer when a reset has not reached its reader thread yet (the race a killed sshd session causes
during the readiness wait). The race cannot be caused on demand, so the channel here is a stand-in
with paramiko's behaviour on that path."""

from __future__ import annotations

import socket
import threading

import pytest

from k26ctl.errors import RemoteCommandError
from k26ctl.remote import ssh
from k26ctl.remote.ssh import SSHHost, SSHTarget


class _Transport:
    def is_active(self) -> bool:
        return True  # the reader thread has not seen the reset yet


class _ChannelAfterReset:
    """A finished command's channel on a connection that was reset after its exit status arrived."""

    def __init__(self, out: bytes, *, finished: bool = True) -> None:
        self._out = [out] if out else []
        self.eof_received = finished
        self.closed = False
        self._finished = finished
        self.close_calls = 0
        self._wakeup = socket.socketpair()  # what select() waits on while the command runs

    def recv_ready(self) -> bool:
        return bool(self._out)

    def recv(self, size: int) -> bytes:
        return self._out.pop(0)

    def recv_stderr_ready(self) -> bool:
        return False

    def exit_status_ready(self) -> bool:
        return self._finished

    def recv_exit_status(self) -> int:
        return 0

    def get_transport(self) -> _Transport:
        return _Transport()

    def fileno(self) -> int:
        return self._wakeup[0].fileno()

    def close(self) -> None:
        self.close_calls += 1
        raise EOFError()  # paramiko's Packetizer.write_all on a broken socket

    def release(self) -> None:
        for end in self._wakeup:
            end.close()


def _host(channel: _ChannelAfterReset, monkeypatch: pytest.MonkeyPatch) -> SSHHost:
    host = SSHHost(SSHTarget(alias="gpu-host", hostname="gpu-host"))
    monkeypatch.setattr(host, "_channel", lambda command, timeout=None: channel)
    return host


def test_a_finished_command_keeps_its_result_when_the_close_finds_the_link_broken(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    channel = _ChannelAfterReset(b"ActiveState=active\n")
    result = _host(channel, monkeypatch).run(["systemctl", "show", "x.service"])
    assert (result.returncode, result.stdout) == (0, "ActiveState=active\n")
    assert channel.close_calls == 1
    channel.release()


def test_a_timed_out_command_still_reports_its_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    channel = _ChannelAfterReset(b"", finished=False)
    with pytest.raises(RemoteCommandError) as info:
        _host(channel, monkeypatch).run(["sleep", "100"], timeout=0.05)
    assert info.value.returncode == 124 and channel.close_calls == 1
    channel.release()


def test_killing_a_process_and_ending_a_forward_pipe_close_quietly() -> None:
    channel = _ChannelAfterReset(b"")
    ssh._ChannelProcess(channel).kill()  # type: ignore[arg-type]
    left, right = socket.socketpair()
    stop = threading.Event()
    stop.set()
    ssh._pipe(left, channel, stop)  # type: ignore[arg-type]
    assert channel.close_calls == 2
    right.close()
    channel.release()


def test_without_the_quiet_close_the_same_channel_raises() -> None:
    """What the readiness wait met (the test above can fail): the bare close raises."""
    channel = _ChannelAfterReset(b"")
    with pytest.raises(EOFError):
        channel.close()
    channel.release()
