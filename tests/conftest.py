"""Shared fixtures. `lab_host`: one real nspawn lab host (systemd + sshd) for the whole session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from k26ctl.lab.host import LabHostState
from tests.support.hosts import lab_host_name


@pytest.fixture(scope="session")
def lab_host() -> Iterator[LabHostState]:
    """A lab host brought up once per session (name from K26CTL_TEST_LAB) and torn down at the end."""
    from k26ctl.lab.host import lab_down, lab_up, prerequisite_problem

    reason = prerequisite_problem()
    if reason:
        pytest.skip(f"lab host unavailable: {reason}")
    name = lab_host_name()
    state = lab_up(name)
    try:
        yield state
    finally:
        lab_down(name)
