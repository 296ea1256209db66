"""Shared fixtures. `lab_host`: one real nspawn lab host (systemd + sshd) for the whole session."""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator

import pytest

from k26ctl.lab.host import LabHostState
from tests.support import lanes, tiers
from tests.support.hosts import lab_host_name

# Test modules are compiled once and kept in __pycache__ (pytest's assertion rewrites included), as
# bootstrap.sh does for k26ctl: where PYTHONDONTWRITEBYTECODE is set, each xdist worker of every run
# would rewrite and compile all of them again, about 3.5 s of CPU a worker (the fast tier's collection:
# 10.5 CPU-s without them, 7 with them).
sys.dont_write_bytecode = False


def pytest_configure(config: pytest.Config) -> None:
    """A suite started in the background by a shell without job control (`cmd &` in a script) inherits
    SIGINT ignored, and so would every k26ctl it starts: the interrupt tests would see Ctrl-C do
    nothing. They test what Ctrl-C does at a terminal, so the suite takes it back; a handled signal is
    reset to its default in every child, where Python installs its own handler again."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    tiers.configure(config)
    _load_hypothesis_profile()


def _load_hypothesis_profile() -> None:
    """Property tests try the same inputs on every run (derandomized, no example database), so one
    fails only where the code changed, never by the luck of a draw; `tiers.examples` sets how many."""
    from hypothesis import HealthCheck, settings

    settings.register_profile(
        "k26ctl",
        derandomize=True,
        database=None,
        deadline=None,
        max_examples=tiers.examples(100),
        suppress_health_check=[HealthCheck.too_slow],
    )
    settings.load_profile("k26ctl")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Marks the fast tier (`-m fast`) before `-m` selects: tests/support/tiers.py."""
    tiers.classify(items)
    lanes.assign(items)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    # k26ctl run in this process installs its own SIGINT handler (finish the step, then stop); the next
    # test gets the handler this one started with, so a Ctrl-C test never inherits a deferring one
    sigint = signal.getsignal(signal.SIGINT)
    tiers.entering(item)
    try:
        yield
    finally:
        tiers.entering(None)
        signal.signal(signal.SIGINT, sigint)


@pytest.fixture(scope="session")
def lab_host() -> Iterator[LabHostState]:
    """A lab host brought up once per session (name from K26CTL_TEST_LAB) and torn down at the end."""
    from k26ctl.lab.host import lab_down, lab_up, prerequisite_problem

    reason = prerequisite_problem()
    if reason:
        pytest.skip(f"lab host unavailable: {reason}")
    tiers.require_slow("a lab host")
    name = lab_host_name()
    state = lab_up(name)
    try:
        yield state
    finally:
        lab_down(name)
