"""The host lock's lease: a holder keeps the lock only while its client's heartbeats reach the host.

A client that vanishes without closing its connection (frozen, or killed while its link is down, so
the host's sshd keeps the session open) loses the lock once the lease runs out; a live client keeps
it for as long as it likes, far past the lease. Real processes on both sides: the holder runs on the
lab host through its sshd (or on this machine for LocalHost), the vanishing client is a separate
Python process stopped or killed with a signal, and the host is watched through nsenter, not SSH.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import cast

import pytest

from k26ctl.errors import ConfigError, LockHeldError
from k26ctl.lab.host import LabHostState
from k26ctl.remote.local import LocalHost
from k26ctl.remote.shell import DEFAULT_LOCK_LEASE, LOCK_DIR, LOCK_LEASE_ENV, lock_lease
from k26ctl.remote.ssh import SSHHost
from tests.support.hosts import lab_target, ssh_host

LEASE = 2.0  # short, so the tests wait seconds; production default is DEFAULT_LOCK_LEASE

# A client that takes the lock, reports the holder's pid on the host, and then sits in the block.
CLIENT = """
import json, sys, time
from k26ctl.remote.local import LocalHost
from k26ctl.remote.ssh import SSHHost, SSHTarget
kind, target, name, lease = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
host = LocalHost() if kind == "local" else SSHHost(SSHTarget(**json.loads(target)), connect_timeout=5)
with host.lock(name, holder="vanishing@client", lease=lease) as info:
    print(info.extra["pid"], flush=True)
    time.sleep(600)
"""


@contextmanager
def lock_client(kind: str, target: str, name: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", CLIENT, kind, target, name, f"{LEASE:g}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        pid = proc.stdout.readline().strip()
        assert pid.isdigit(), f"the client did not get the lock: {proc.stderr.read() if proc.stderr else ''}"
        yield proc, pid
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
            proc.kill()
        proc.wait(timeout=10)


# ---- watching the lab host from outside (nsenter: works while its link is down) -----------------


def console(lab: LabHostState, command: str) -> subprocess.CompletedProcess[str]:
    children = Path(f"/proc/{lab.pid}/task/{lab.pid}/children").read_text().split()
    return subprocess.run(
        ["nsenter", "-t", children[0], "-m", "-u", "-i", "-n", "-p", "--", "/bin/sh", "-c", command],
        capture_output=True,
        text=True,
        timeout=30,
    )


def lock_is_free(lab: LabHostState | None, name: str) -> bool:
    """flock -n on the lock file, on the lab host (or on this machine for None): free right now?"""
    command = f"flock -n {LOCK_DIR}/k26ctl-{name}.lock true"
    if lab is not None:
        return console(lab, command).returncode == 0
    return subprocess.run(["sh", "-c", command]).returncode == 0


def sshd_session_of(lab: LabHostState, pid: str) -> str:
    """The sshd process above `pid` on the lab host (the session that runs the lock holder)."""
    out = console(
        lab,
        f'p={pid}; while [ "$p" -gt 1 ]; do '
        'case "$(cat /proc/$p/comm)" in sshd*) echo "$p"; exit 0;; esac; '
        "p=$(awk '/^PPid:/ {print $2}' /proc/$p/status); done; exit 1",
    )
    assert out.returncode == 0, f"no sshd session above holder pid {pid}: {out.stderr}"
    return out.stdout.strip()


def alive_on(lab: LabHostState, pid: str) -> bool:
    """`pid` runs on the lab host. A zombie does not: it has exited (its flock went with its files) and
    waits only for its parent to reap it, which on a busy machine can come after the lock is seen free."""
    state = console(lab, f"awk '/^State:/ {{print $2}}' /proc/{pid}/status")
    return state.returncode == 0 and state.stdout.strip() not in ("", "Z")


def wait_until_free(where: LabHostState | None, name: str, limit: float) -> float:
    started = time.monotonic()
    while time.monotonic() - started < limit:
        if lock_is_free(where, name):
            return time.monotonic() - started
        time.sleep(0.1)
    pytest.fail(f"lock {name} still held {limit:g} s after its client vanished")


@contextmanager
def link_down(lab: LabHostState) -> Iterator[None]:
    """This machine's end of the veth pair to the lab host, down: packets vanish, nothing is reset."""
    prefix = lab.address.rsplit(".", 1)[0] + ".1/"
    out = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True, check=True)
    link = next(line.split()[1].split("@")[0] for line in out.stdout.splitlines() if prefix in line)
    subprocess.run(["ip", "link", "set", link, "down"], check=True)
    try:
        yield
    finally:
        subprocess.run(["ip", "link", "set", link, "up"], check=True)


def target_json(lab: LabHostState) -> str:
    return json.dumps(dataclasses.asdict(lab_target(lab)))


# ---- the lease value --------------------------------------------------------------------------


def test_lease_comes_from_the_argument_then_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(LOCK_LEASE_ENV, raising=False)
    assert lock_lease() == DEFAULT_LOCK_LEASE
    monkeypatch.setenv(LOCK_LEASE_ENV, "7.5")
    assert lock_lease() == 7.5
    assert lock_lease(12) == 12
    for bad in ("soon", "0", "-3", "nan", "inf"):
        monkeypatch.setenv(LOCK_LEASE_ENV, bad)
        with pytest.raises(ConfigError) as exc:
            lock_lease()
        assert LOCK_LEASE_ENV in exc.value.one_line() and exc.value.exit_code == 78


# ---- SSH: the lab host ------------------------------------------------------------------------


@pytest.mark.labhost
def test_live_holder_keeps_the_lock_far_past_its_lease(lab_host: LabHostState) -> None:
    """The deploy's own work (commands, long waits) goes on while the heartbeats keep the lock."""
    # `with` yields the base Host type; these are SSHHosts, whose lock() takes a lease
    with ssh_host(lab_host).open() as alice, ssh_host(lab_host).open() as bob:
        with cast(SSHHost, alice).lock("t-lease-live", holder="alice@workstation", lease=LEASE) as info:
            assert info.extra["lease"] == f"{LEASE:g}"
            held_until = time.monotonic() + 3 * LEASE
            while time.monotonic() < held_until:
                assert alice.run(["true"]).ok
                time.sleep(LEASE / 2)
            with pytest.raises(LockHeldError) as exc, bob.lock("t-lease-live", holder="bob@laptop"):
                pytest.fail("two holders at once")
            message = exc.value.one_line()
            assert "alice@workstation" in message and info.since in message
            assert f"expires within {LEASE:g} s" in message
        # a clean release frees it at once: no waiting for the lease
        with cast(SSHHost, bob).lock("t-lease-live", holder="bob@laptop", lease=LEASE) as info2:
            assert info2.holder == "bob@laptop"


@pytest.mark.labhost
def test_frozen_client_loses_the_lock_after_the_lease(lab_host: LabHostState) -> None:
    """SIGSTOP: the client's connection stays open (its kernel still answers TCP), it just says
    nothing more, which is what the host sees of a client whose link died."""
    name = "t-lease-frozen"
    with lock_client("ssh", target_json(lab_host), name) as (client, holder_pid):
        session = sshd_session_of(lab_host, holder_pid)
        os.kill(client.pid, signal.SIGSTOP)
        assert not lock_is_free(lab_host, name)
        with ssh_host(lab_host).open() as bob:
            with pytest.raises(LockHeldError, match="vanishing@client"), bob.lock(name, holder="bob"):
                pytest.fail("the frozen client's lock was free at once")
            waited = wait_until_free(lab_host, name, LEASE + 15)
            assert not alive_on(lab_host, holder_pid), "lock free, yet its holder still runs"
            assert alive_on(lab_host, session), "the session closed: this was not the lease"
            with cast(SSHHost, bob).lock(name, holder="bob@laptop", lease=LEASE) as info:
                assert info.holder == "bob@laptop"
        print(f"frozen client: lock freed {waited:.2f} s after the freeze (lease {LEASE:g} s)")


@pytest.mark.labhost
def test_client_killed_while_its_link_is_down_loses_the_lock_after_the_lease(
    lab_host: LabHostState,
) -> None:
    """The case from the field: the operator's link drops and the client dies; no FIN or RST
    reaches the host, whose sshd keeps the session. The lock must free itself anyway."""
    name = "t-lease-cut"
    with lock_client("ssh", target_json(lab_host), name) as (client, holder_pid):
        session = sshd_session_of(lab_host, holder_pid)
        with link_down(lab_host):
            client.kill()
            client.wait(timeout=10)
            assert not lock_is_free(lab_host, name)
            waited = wait_until_free(lab_host, name, LEASE + 15)
            assert alive_on(lab_host, session), "the session closed: this was not the lease"
            assert console(lab_host, f"test -e {LOCK_DIR}/k26ctl-{name}.holder").returncode != 0
        with (
            ssh_host(lab_host).open() as bob,
            cast(SSHHost, bob).lock(name, holder="bob@laptop", lease=LEASE) as info,
        ):
            assert info.holder == "bob@laptop"
    print(f"killed behind a dead link: lock freed {waited:.2f} s after the kill (lease {LEASE:g} s)")


# ---- LocalHost: the same lock on this machine ---------------------------------------------------


def test_local_live_holder_keeps_the_lock_and_a_frozen_one_loses_it() -> None:
    name = f"t-lease-local-{os.getpid()}"  # this machine's /run/lock is shared with other test runs
    try:
        _local_lease(name)
    finally:
        Path(f"{LOCK_DIR}/k26ctl-{name}.lock").unlink(missing_ok=True)


def _local_lease(name: str) -> None:
    alice, bob = LocalHost(name="alice"), LocalHost(name="bob")
    with alice.lock(name, holder="alice@here", lease=LEASE):
        time.sleep(2.5 * LEASE)
        with pytest.raises(LockHeldError, match=f"expires within {LEASE:g} s"), bob.lock(name, holder="bob"):
            pytest.fail("two holders at once")
    with lock_client("local", "", name) as (client, holder_pid):
        os.kill(client.pid, signal.SIGSTOP)
        assert not lock_is_free(None, name)
        wait_until_free(None, name, LEASE + 15)
        with bob.lock(name, holder="bob@here", lease=LEASE) as info:
            assert info.holder == "bob@here"
        # the holder has exited (a zombie until its frozen parent reaps it)
        stat = Path(f"/proc/{holder_pid}/stat")
        assert not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] == "Z"
