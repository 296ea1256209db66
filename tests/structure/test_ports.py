"""tests/support/ports.py: the ports handed to servers of other processes stay out of the kernel's
ephemeral range (where outgoing connections take theirs) and are never handed out twice."""

from __future__ import annotations

import socket

import pytest

from tests.support import ports


def test_free_ports_are_distinct_bindable_and_below_the_ephemeral_range() -> None:
    low = ports._ephemeral_low()
    handed = [ports.free_port() for _ in range(20)]
    assert len(set(handed)) == 20
    assert all(10_000 <= port < low for port in handed), (handed, low)
    with socket.socket() as server:
        server.bind(("127.0.0.1", handed[-1]))  # the caller's server can take it


def test_a_bound_port_is_skipped() -> None:
    with socket.socket() as taken:
        port = ports.free_port()
        taken.bind(("127.0.0.1", port + 1))  # the next one in this process's order
        following = ports.free_port()
        assert following not in (port, port + 1), (port, following)


def test_the_refused_port_refuses_and_is_held() -> None:
    with ports.refused_port() as port:
        with socket.socket() as client, pytest.raises(ConnectionRefusedError):
            client.settimeout(5)
            client.connect(("127.0.0.1", port))
        with socket.socket() as other, pytest.raises(OSError):
            other.bind(("127.0.0.1", port))  # no other server can take it meanwhile
