"""Loopback ports for the tests: one to start a server of another process on (sglang-router, the lab
server, Prometheus: each must be told its port before it binds it), and one where nothing answers.

A port from `bind(("127.0.0.1", 0))` comes from the kernel's ephemeral range, where every outgoing
connection of every test on the machine also takes its local port: between that probe and the server's
own bind, a client elsewhere in the run can take the port, and the server fails to start. `free_port`
hands out ports from below that range instead, from a slice of its own for each xdist worker, each port
once per process. `refused_port` keeps a socket bound (not listening) on its port while a test uses it:
connections are refused, and no other server can take the port meanwhile.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_FLOOR = 10_000  # below: well-known services of the machine
_SLICES = 16  # worker gwN takes slice N % 16


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def _worker_slice() -> int:
    name = os.environ.get("PYTEST_XDIST_WORKER", "")  # "gw3" on a worker, unset without -n
    return int(name[2:]) % _SLICES if name[2:].isdigit() else 0


def _candidates() -> Iterator[int]:
    span = (_ephemeral_low() - _FLOOR) // _SLICES
    if span < 64:
        return iter(())  # a machine whose ephemeral range starts low: the kernel picks (fallback below)
    first = _FLOOR + _worker_slice() * span
    start = os.getpid() % span  # two runs side by side start at different places in the slice
    return (first + (start + i) % span for i in range(span))


_lock = threading.Lock()
_ports = _candidates()


def _bindable(port: int) -> bool:
    # no SO_REUSEADDR, so a port still in TIME_WAIT fails here and is skipped: a port this probe can
    # bind, the server can bind too, whether or not it sets SO_REUSEADDR
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A loopback port nothing is bound to, outside the ephemeral range, not handed out before."""
    with _lock:
        for port in _ports:
            if _bindable(port):
                return port
    with socket.socket() as probe:  # slice used up, or no room below the ephemeral range
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def refused_port() -> Iterator[int]:
    """A loopback port where connections are refused, held for the `with` block."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield int(held.getsockname()[1])
