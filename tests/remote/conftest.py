"""Fixtures of the remote-layer tests: a connection to the session lab host."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from k26ctl.lab.host import LabHostState
from k26ctl.remote.ssh import SSHHost
from tests.support.hosts import lab_profile


@pytest.fixture
def host(lab_host: LabHostState) -> Iterator[SSHHost]:
    """A fresh SSH connection to the session lab host (through the profile path: host.lab)."""
    from k26ctl.remote import connect

    h = connect(lab_profile(lab_host))
    assert isinstance(h, SSHHost)
    try:
        yield h
    finally:
        h.close()
