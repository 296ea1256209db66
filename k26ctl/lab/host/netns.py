"""Network namespaces for lab hosts: one namespace and one veth pair per host, 10.231.IDX.0/30.

The outside end gets 10.231.IDX.1, the inside end 10.231.IDX.2. Indexes are allocated under a
machine-wide file lock, and the set of used indexes is read from the live interfaces, so two
`lab up` runs in parallel (different names, different state directories) never pick the same one.
"""

from __future__ import annotations

import fcntl
import os
import re
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from k26ctl.errors import K26Error

SUBNET_PREFIX = "10.231"
NETNS_PREFIX = "k26lab-"
GLOBAL_LOCK = Path("/run/lock/k26ctl-lab-index.lock")
_ADDR_RE = re.compile(r"\binet 10\.231\.(\d+)\.1/30\b")


@dataclass(frozen=True)
class NetPlan:
    netns: str
    index: int
    outside_if: str
    inside_if: str

    @property
    def outside_address(self) -> str:
        return f"{SUBNET_PREFIX}.{self.index}.1"

    @property
    def inside_address(self) -> str:
        return f"{SUBNET_PREFIX}.{self.index}.2"


def netns_name(lab_name: str) -> str:
    return NETNS_PREFIX + lab_name


def _ip(*args: str, netns: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    argv = ["ip", *(["-n", netns] if netns else []), *args]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise K26Error(f"{' '.join(argv)} failed: {proc.stderr.strip()}", "is this run as root?")
    return proc


def netns_exists(name: str) -> bool:
    return Path("/run/netns", name).exists()


def netns_pids(name: str) -> list[int]:
    if not netns_exists(name):
        return []
    proc = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True, check=False)
    return [int(p) for p in proc.stdout.split() if p.isdigit()]


def used_indexes() -> set[int]:
    """Indexes whose outside address is configured on this machine (any lab host, any owner)."""
    proc = _ip("-o", "-4", "addr", "show")
    return {int(m.group(1)) for m in _ADDR_RE.finditer(proc.stdout)}


@contextmanager
def index_lock() -> Iterator[None]:
    GLOBAL_LOCK.parent.mkdir(parents=True, exist_ok=True)
    with GLOBAL_LOCK.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def create(lab_name: str) -> NetPlan:
    """Allocate a free index and create namespace + veth pair + addresses, all under the lock."""
    name = netns_name(lab_name)
    with index_lock():
        if netns_exists(name):
            raise K26Error(f"network namespace {name} already exists", "run `k26ctl lab host down` first")
        taken = used_indexes()
        free = [i for i in range(1, 255) if i not in taken]
        if not free:
            raise K26Error("no free 10.231.x.0/30 subnet for another lab host", "bring some down")
        plan = NetPlan(netns=name, index=free[0], outside_if=f"k26h{free[0]}", inside_if=f"k26c{free[0]}")
        _ip("link", "del", plan.outside_if, check=False)  # a stale outside end from a crashed run
        subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True, check=True)
        try:
            _ip("link", "add", plan.outside_if, "type", "veth", "peer", "name", plan.inside_if)
            _ip("link", "set", plan.inside_if, "netns", name)
            _ip("addr", "add", f"{plan.outside_address}/30", "dev", plan.outside_if)
            _ip("link", "set", plan.outside_if, "up")
            _ip("addr", "add", f"{plan.inside_address}/30", "dev", plan.inside_if, netns=name)
            _ip("link", "set", plan.inside_if, "up", netns=name)
            _ip("link", "set", "lo", "up", netns=name)
        except BaseException:
            delete(lab_name)
            raise
        return plan


def delete(lab_name: str, *, timeout: float = 10.0) -> None:
    """Kill anything still inside the namespace, then delete it (which removes both veth ends)."""
    name = netns_name(lab_name)
    if not netns_exists(name):
        return
    deadline = time.monotonic() + timeout
    while pids := netns_pids(name):
        if time.monotonic() > deadline:
            for pid in pids:
                with suppress(ProcessLookupError):
                    os.kill(pid, 9)
            deadline = time.monotonic() + 5.0
        time.sleep(0.05)
    subprocess.run(["ip", "netns", "del", name], capture_output=True, text=True, check=False)


def lab_namespaces() -> list[str]:
    """Names of lab hosts that have a namespace on this machine."""
    root = Path("/run/netns")
    if not root.is_dir():
        return []
    return sorted(p.name[len(NETNS_PREFIX) :] for p in root.iterdir() if p.name.startswith(NETNS_PREFIX))
