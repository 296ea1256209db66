"""Shared fixtures. `lab_host`: one real nspawn lab host (systemd + sshd) for the whole session."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from k26ctl.lab.host import LabHostState


def lab_host_name() -> str:
    return os.environ.get("K26CTL_TEST_LAB", "k26test")


def lab_skip_reason() -> str | None:
    """Why lab host tests cannot run on this machine (None: they can)."""
    from k26ctl.lab.host import prerequisite_problem

    return prerequisite_problem()


@pytest.fixture(scope="session")
def lab_host() -> Iterator[LabHostState]:
    """A lab host brought up once per session (name from K26CTL_TEST_LAB) and torn down at the end."""
    reason = lab_skip_reason()
    if reason:
        pytest.skip(f"lab host unavailable: {reason}")
    from k26ctl.lab.host import lab_down, lab_up

    name = lab_host_name()
    state = lab_up(name)
    try:
        yield state
    finally:
        lab_down(name)
