"""SSHHost against the real sshd of the lab host: commands, host keys, failures, files, locks, tunnels."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from k26ctl.errors import (
    ExitCode,
    HostKeyError,
    LockHeldError,
    PermissionDeniedError,
    RemoteCommandError,
    UnreachableError,
)
from k26ctl.lab.host import LabHostState
from k26ctl.remote.ssh import SSHHost, load_ssh_config, resolve_target
from tests.support.cli import CliResult, run_k26ctl
from tests.support.hosts import lab_profile, ssh_host

pytestmark = pytest.mark.labhost


def _keygen(path: Path) -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return path


def _one_line_69(exc: pytest.ExceptionInfo[BaseException]) -> str:
    err = exc.value
    assert isinstance(err, UnreachableError)
    assert err.exit_code == ExitCode.UNAVAILABLE == 69
    assert "\n" not in err.one_line()
    return err.one_line()


# ---- commands ----------------------------------------------------------------------------------


def test_argv_is_passed_exactly(host: SSHHost) -> None:
    words = ["a b", "$HOME", "it's", '"dq"', "back\\slash", "100%", "ünï ✓", "*", "; rm -rf /tmp/x", ""]
    res = host.run(["printf", "%s\\n", *words])
    assert res.ok
    assert res.stdout.split("\n")[:-1] == words


def test_exit_code_stdout_stderr_and_env(host: SSHHost) -> None:
    res = host.run(["sh", "-c", 'printf "%s" "$K26X"; echo oops >&2; exit 7'], env={"K26X": "a $b 'c'"})
    assert (res.returncode, res.stdout, res.stderr) == (7, "a $b 'c'", "oops\n")
    with pytest.raises(RemoteCommandError) as exc:
        host.run(["false"], check=True)
    assert exc.value.returncode == 1
    assert host.run(["cat"], stdin=b"from stdin").stdout == "from stdin"


def test_one_connection_is_reused(host: SSHHost) -> None:
    ports = {host.run(["sh", "-c", "echo $SSH_CONNECTION"]).stdout.split()[1] for _ in range(5)}
    assert len(ports) == 1


def test_command_timeout(host: SSHHost) -> None:
    start = time.monotonic()
    with pytest.raises(RemoteCommandError) as exc:
        host.run(["sleep", "300"], timeout=1)
    assert exc.value.returncode == 124
    assert time.monotonic() - start < 60  # the timeout ended it: generous for a busy machine, far below 300
    assert host.run(["true"]).ok  # the connection is still usable


def test_lost_connection_is_an_error_and_the_next_command_reconnects(host: SSHHost) -> None:
    # the command kills its own sshd session process: the connection drops mid-command
    with pytest.raises(UnreachableError) as exc:
        host.run(["sh", "-c", "echo before; kill -9 $PPID; sleep 5"])
    assert "connection lost" in _one_line_69(exc)
    assert host.run(["true"]).ok
    # a command killed by a signal is a result (-1: SSH does not say which signal), not a lost host
    assert host.run(["sh", "-c", "kill -9 $$"]).returncode == -1


def test_stream_yields_lines_and_stops_the_remote_command(host: SSHHost) -> None:
    lines = host.stream(["sh", "-c", "echo one; echo two; exec sleep 77"])
    assert next(lines) == "one"
    assert next(lines) == "two"
    lines.close()  # type: ignore[attr-defined]
    deadline = time.monotonic() + 30
    while host.run(["pgrep", "-x", "-f", "sleep 77"]).ok and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not host.run(["pgrep", "-x", "-f", "sleep 77"]).ok
    assert list(host.stream(["printf", "a\\nb\\nc"])) == ["a", "b", "c"]
    with pytest.raises(RemoteCommandError):
        list(host.stream(["sh", "-c", "echo partial; exit 3"]))


def test_stream_timeout_ends_a_silent_stream(host: SSHHost) -> None:
    start = time.monotonic()
    assert list(host.stream(["sh", "-c", "echo first; exec sleep 780"], timeout=1.0)) == ["first"]
    # the 1 s timeout ended it, not the command: a bound generous for a busy machine, far below 780 s
    assert time.monotonic() - start < 60
    deadline = time.monotonic() + 30
    while host.run(["pgrep", "-x", "-f", "sleep 780"]).ok and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not host.run(["pgrep", "-x", "-f", "sleep 780"]).ok


# ---- host keys, auth, reachability -------------------------------------------------------------


def test_unknown_host_key_refused_then_accepted_with_opt_in(lab_host: LabHostState, tmp_path: Path) -> None:
    known = tmp_path / "known_hosts"
    known.write_text("")
    with pytest.raises(HostKeyError) as exc:
        ssh_host(lab_host, known_hosts=[str(known)]).open()
    line = _one_line_69(exc)
    assert "unknown host key" in line and "--accept-new-host-key" in line
    assert known.read_text() == ""

    with ssh_host(lab_host, known_hosts=[str(known)], accept_new_host_key=True).open() as h:
        assert h.run(["hostname"]).stdout.strip() == lab_host.name
    recorded = known.read_text()
    expected_key = Path(lab_host.known_hosts_path).read_text().split()[1:3]
    assert recorded.split()[:3] == [lab_host.address, *expected_key]
    with ssh_host(lab_host, known_hosts=[str(known)]).open() as h:  # no opt-in needed any more
        assert h.run(["true"]).ok


def test_changed_host_key_always_refused(lab_host: LabHostState, tmp_path: Path) -> None:
    other = _keygen(tmp_path / "impostor")
    kind, blob = Path(f"{other}.pub").read_text().split()[:2]
    known = tmp_path / "known_hosts"
    known.write_text(f"{lab_host.address} {kind} {blob}\n")
    for accept_new in (False, True):
        with pytest.raises(HostKeyError) as exc:
            ssh_host(lab_host, known_hosts=[str(known)], accept_new_host_key=accept_new).open()
        line = _one_line_69(exc)
        assert "CHANGED" in line and "ssh-keygen -R" in line
    assert known.read_text() == f"{lab_host.address} {kind} {blob}\n"


def test_auth_failure_is_one_line_69(lab_host: LabHostState, tmp_path: Path) -> None:
    stranger = _keygen(tmp_path / "stranger")
    start = time.monotonic()
    with pytest.raises(UnreachableError) as exc:
        ssh_host(lab_host, identity_files=[str(stranger)], connect_timeout=3).open()
    assert time.monotonic() - start < 3 + 20  # within the connect timeout, with room for a busy machine
    assert "authentication failed" in _one_line_69(exc)


def test_closed_port_is_one_line_69(lab_host: LabHostState) -> None:
    start = time.monotonic()
    with pytest.raises(UnreachableError) as exc:
        ssh_host(lab_host, port=2222, connect_timeout=3).open()
    assert time.monotonic() - start < 3 + 20  # within the connect timeout, with room for a busy machine
    assert "refused" in _one_line_69(exc)


@pytest.fixture
def silent_listener(lab_host: LabHostState) -> Iterator[tuple[str, int]]:
    """A TCP port on our own end of the lab veth that accepts and never speaks (a hung sshd)."""
    outside = lab_host.address.rsplit(".", 1)[0] + ".1"
    server = socket.socket()
    server.bind((outside, 0))
    server.listen(4)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[:2]
    finally:
        stop.set()
        thread.join()
        for conn in accepted:
            conn.close()
        server.close()


def test_silent_server_times_out_within_connect_timeout(
    lab_host: LabHostState, silent_listener: tuple[str, int]
) -> None:
    address, port = silent_listener
    start = time.monotonic()
    with pytest.raises(UnreachableError) as exc:
        ssh_host(lab_host, hostname=address, port=port, connect_timeout=1.5).open()
    elapsed = time.monotonic() - start
    assert 1.0 < elapsed < 1.5 + 20, elapsed  # the connect timeout, not a hang
    _one_line_69(exc)


def test_profile_naming_a_lab_host_that_is_down(lab_host: LabHostState) -> None:
    from k26ctl.remote import connect

    profile = lab_profile(lab_host).model_copy(deep=True)
    profile.host.lab = "t-remote-never-started"
    with pytest.raises(UnreachableError) as exc:
        connect(profile)
    assert "lab host up --name t-remote-never-started" in _one_line_69(exc)


def test_proxyjump_from_ssh_config(lab_host: LabHostState, tmp_path: Path) -> None:
    config = tmp_path / "ssh_config"
    common = (
        f"  HostName {lab_host.address}\n  User root\n  IdentityFile {lab_host.key_path}\n"
        f"  UserKnownHostsFile {lab_host.known_hosts_path}\n"
    )
    config.write_text(f"Host k26jump\n{common}\nHost k26target\n{common}  ProxyJump k26jump\n")
    ssh_config = load_ssh_config(str(config))
    target = resolve_target("k26target", config=ssh_config)
    assert target.proxy_jump == ["k26jump"] and target.identity_files == [lab_host.key_path]
    with SSHHost(target, ssh_config=ssh_config, connect_timeout=5).open() as h:
        # the session arrives from the jump host itself, not from this machine's end of the veth
        source = h.run(["sh", "-c", "echo $SSH_CONNECTION"]).stdout.split()[0]
        assert source == lab_host.address


def test_profile_address_is_an_ssh_config_alias(
    lab_host: LabHostState, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from k26ctl.remote import connect

    config = tmp_path / "ssh_config"
    config.write_text(
        f"Host k26-host\n  HostName {lab_host.address}\n  Port {lab_host.port}\n  User root\n"
        f"  IdentityFile {lab_host.key_path}\n  UserKnownHostsFile {lab_host.known_hosts_path}\n"
    )
    monkeypatch.setenv("K26CTL_SSH_CONFIG", str(config))
    profile = lab_profile(lab_host).model_copy(deep=True)
    profile.host.lab = None
    profile.host.address = "k26-host"
    with connect(profile) as h:
        assert isinstance(h, SSHHost) and h.target.hostname == lab_host.address
        assert h.run(["hostname"]).stdout.strip() == lab_host.name


# ---- files -------------------------------------------------------------------------------------


def test_atomic_write_keeps_mode_owner_and_backs_up(host: SSHHost) -> None:
    path = "/opt/k26lab/atomic/keep.conf"
    host.run(["sh", "-c", f"mkdir -p /opt/k26lab/atomic && rm -f {path}*"], check=True)
    first = host.write_file_atomic(path, b"one\n")
    assert first.changed and first.backup_path is None
    host.run(["chown", "1234:2345", path], check=True)
    host.run(["chmod", "0640", path], check=True)

    second = host.write_file_atomic(path, b"two\n")
    assert second.changed and second.backup_path
    assert host.read_file(path) == b"two\n"
    assert host.read_file(second.backup_path) == b"one\n"
    assert host.run(["stat", "-c", "%a %u %g", path]).stdout.split() == ["640", "1234", "2345"]
    assert host.sha256(path) == second.sha256

    same = host.write_file_atomic(path, b"two\n")
    assert not same.changed and same.backup_path is None
    assert host.write_file_atomic(path, b"two\n", mode=0o600).changed
    assert host.run(["stat", "-c", "%a", path]).stdout.split() == ["600"]
    listing = host.run(["ls", "-a", "/opt/k26lab/atomic"]).stdout.split()
    assert not [n for n in listing if "k26ctl-tmp" in n]
    assert host.read_file("/opt/k26lab/atomic/missing") is None
    assert host.sha256("/opt/k26lab/atomic/missing") is None


_WRITER = """
import sys
from k26ctl.lab.host import load_state
from k26ctl.remote.ssh import SSHHost, SSHTarget
s = load_state(sys.argv[1])
t = SSHTarget(alias="w", hostname=s.address, port=s.port, user="root", identity_files=[s.key_path],
              known_hosts=[s.known_hosts_path], use_agent=False)
h = SSHHost(t).open()
print("connected", flush=True)
h.write_file_atomic(sys.argv[2], b"N" * (256 * 1024 * 1024))
print("finished", flush=True)
"""


def test_write_killed_mid_transfer_leaves_old_file(host: SSHHost, lab_host: LabHostState) -> None:
    directory = "/opt/k26lab/atomic-kill"
    path = f"{directory}/model.conf"
    host.run(["sh", "-c", f"rm -rf {directory} && mkdir -p {directory}"], check=True)
    host.write_file_atomic(path, b"old content\n")
    writer = subprocess.Popen(
        [sys.executable, "-c", _WRITER, lab_host.name, path], stdout=subprocess.PIPE, text=True
    )
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "connected"
        deadline = time.monotonic() + 30
        size = 0
        while time.monotonic() < deadline:  # wait until the temp file holds part of the upload
            res = host.run(["sh", "-c", f"stat -c %s {directory}/.model.conf.k26ctl-tmp-* 2>/dev/null"])
            size = int(res.stdout.split()[0]) if res.ok and res.stdout.strip() else 0
            if size > 1024 * 1024:
                break
            time.sleep(0.02)
        assert size > 1024 * 1024, "the upload never got going"
        writer.kill()
    finally:
        writer.kill()
        writer.wait()
    assert host.read_file(path) == b"old content\n"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # the host side notices the cut and removes its temp file
        if host.run(["ls", "-A", directory]).stdout.split() == ["model.conf"]:
            break
        time.sleep(0.1)
    assert host.run(["ls", "-A", directory]).stdout.split() == ["model.conf"]


# ---- locks -------------------------------------------------------------------------------------


def test_lock_contention_names_holder_and_since(lab_host: LabHostState) -> None:
    with ssh_host(lab_host).open() as alice, ssh_host(lab_host).open() as bob:
        with alice.lock("t-deploy", holder="alice@workstation") as info:
            assert info.holder == "alice@workstation" and info.since
            with pytest.raises(LockHeldError) as exc, bob.lock("t-deploy", holder="bob@laptop"):
                pytest.fail("two holders at once")
            message = exc.value.one_line()
            assert "alice@workstation" in message and info.since in message
            assert f"pid {info.extra['pid']}" in message
        with bob.lock("t-deploy", holder="bob@laptop") as info2:  # released on exit
            assert info2.holder == "bob@laptop"


def test_lock_freed_when_the_holder_disappears(lab_host: LabHostState) -> None:
    alice = ssh_host(lab_host).open()
    held = alice.lock("t-crash", holder="alice@workstation")
    held.__enter__()
    alice.close()  # the operator's connection dies while holding the lock
    with ssh_host(lab_host).open() as bob, bob.lock("t-crash", holder="bob@laptop", wait=10) as info:
        assert info.holder == "bob@laptop"


def test_lock_wait_gets_it_after_release(lab_host: LabHostState) -> None:
    with ssh_host(lab_host).open() as alice, ssh_host(lab_host).open() as bob:
        ctx = alice.lock("t-wait", holder="alice@workstation")
        ctx.__enter__()
        timer = threading.Timer(0.5, ctx.__exit__, args=(None, None, None))
        timer.start()
        with bob.lock("t-wait", holder="bob@laptop", wait=10) as info:
            assert info.holder == "bob@laptop"
        timer.join()


# ---- sudo --------------------------------------------------------------------------------------


@pytest.fixture
def operator_login(host: SSHHost) -> Iterator[str]:
    """A non-root account on the lab host (the lab's authorized key admits any account; password
    field '*': no password login, but not a locked account, which sshd would refuse)."""
    user = "k26op"
    host.run(["sh", "-c", f"id {user} >/dev/null 2>&1 || useradd -M -s /bin/sh -p '*' {user}"], check=True)
    yield user


def test_non_root_without_sudo_is_a_clear_permission_error(
    lab_host: LabHostState, operator_login: str
) -> None:
    with ssh_host(lab_host, user=operator_login).open() as h:
        assert h.run(["id", "-un"]).stdout.strip() == operator_login
        assert h.run(["true"], sudo=False).ok
        with pytest.raises(PermissionDeniedError) as exc:
            h.run(["systemctl", "daemon-reload"], sudo=True)
        assert exc.value.exit_code == 77
        assert "sudo is not installed" in exc.value.message


def test_sudo_password_prompt_is_an_error_not_a_hang(
    host: SSHHost, lab_host: LabHostState, operator_login: str
) -> None:
    # sudo is not installed on this image; a stand-in answers `sudo -n` the way sudo does when the
    # account has no NOPASSWD rule (message and exit status 1), without waiting for input.
    fake = b'#!/bin/sh\necho "sudo: a password is required" >&2\nexit 1\n'
    host.write_file_atomic("/usr/local/bin/sudo", fake, mode=0o755, backup=False)
    try:
        with ssh_host(lab_host, user=operator_login).open() as h:
            start = time.monotonic()
            with pytest.raises(PermissionDeniedError) as exc:
                h.run(["systemctl", "daemon-reload"], sudo=True)
            assert time.monotonic() - start < 60  # no wait for a password that never comes
            assert "password" in exc.value.message and "NOPASSWD" in (exc.value.hint or "")
            with pytest.raises(PermissionDeniedError):
                h.write_file_atomic("/etc/systemd/system/x.service", b"x", sudo=True)
            with pytest.raises(PermissionDeniedError):
                h.read_file("/etc/shadow", sudo=True)
    finally:
        host.run(["rm", "-f", "/usr/local/bin/sudo"])


# ---- port forward ------------------------------------------------------------------------------


def test_forward_reaches_a_service_bound_to_the_hosts_loopback(host: SSHHost) -> None:
    host.run(["sh", "-c", "mkdir -p /opt/k26lab/www && echo hello-through-ssh > /opt/k26lab/www/index.txt"])
    unit = "k26t-http"
    started = host.run(
        [
            "systemd-run",
            f"--unit={unit}",
            "/opt/k26lab/venv/bin/python",
            "-m",
            "http.server",
            "18765",
            "--bind",
            "127.0.0.1",
            "--directory",
            "/opt/k26lab/www",
        ]
    )
    assert started.ok, started.stderr
    try:
        with host.forward("127.0.0.1", 18765) as (address, port):
            assert address == "127.0.0.1"
            deadline = time.monotonic() + 20
            body = b""
            while time.monotonic() < deadline:
                try:
                    with urllib.request.urlopen(f"http://{address}:{port}/index.txt", timeout=5) as resp:
                        body = resp.read()
                    break
                except OSError:
                    time.sleep(0.2)
            assert body == b"hello-through-ssh\n"
    finally:
        host.run(["systemctl", "stop", unit])


def test_local_host_has_the_same_file_and_lock_semantics(tmp_path: Path) -> None:
    from k26ctl.remote.local import LocalHost

    local = LocalHost()
    path = str(tmp_path / "unit.service")
    assert local.write_file_atomic(path, b"a").changed
    os.chmod(path, 0o640)
    second = local.write_file_atomic(path, b"b")
    assert second.changed and second.backup_path and Path(second.backup_path).read_bytes() == b"a"
    assert oct(os.stat(path).st_mode & 0o777) == "0o640"
    assert not local.write_file_atomic(path, b"b").changed
    assert local.read_file(path) == b"b" and local.read_file(path + ".nope") is None
    assert local.run(["printf", "%s", "a b $c"]).stdout == "a b $c"
    with local.lock("t-local", holder="alice@here"):
        with pytest.raises(LockHeldError) as exc, LocalHost().lock("t-local", holder="bob@there"):
            pass
        assert "alice@here" in exc.value.message
    assert list(local.stream(["sh", "-c", "echo x; exec sleep 30"], timeout=0.5)) == ["x"]
    assert list(local.stream(["printf", "a\\nb"])) == ["a", "b"]
    with local.forward("localhost", 8080) as addr:
        assert addr == ("127.0.0.1", 8080)


def test_cli_host_key_errors_are_one_line_with_exit_69(lab_host: LabHostState, tmp_path: Path) -> None:
    known = tmp_path / "known_hosts"
    known.write_text("")
    config = tmp_path / "ssh_config"
    config.write_text(
        f"Host k26-host\n  HostName {lab_host.address}\n  User root\n  IdentityFile {lab_host.key_path}\n"
        f"  UserKnownHostsFile {known}\n"
    )
    env = {"K26CTL_SSH_CONFIG": str(config)}

    def k26ctl(*args: str) -> CliResult:
        return run_k26ctl(*args, env=env)

    unknown = k26ctl("status", "base")  # the shipped profile names its host by the alias k26-host
    assert unknown.returncode == 69
    lines = unknown.stderr.splitlines()
    assert lines[0].startswith("error: root@") and "unknown host key" in lines[0]
    assert len(lines) == 2 and lines[1].startswith("  hint:") and "Traceback" not in unknown.stderr

    k26ctl("status", "base", "--accept-new-host-key")
    assert known.read_text().split()[0] == lab_host.address

    other = _keygen(tmp_path / "impostor")
    known.write_text(f"{lab_host.address} {' '.join(Path(f'{other}.pub').read_text().split()[:2])}\n")
    changed = k26ctl("status", "base", "--accept-new-host-key")
    assert changed.returncode == 69
    assert "host key CHANGED" in changed.stderr.splitlines()[0]
