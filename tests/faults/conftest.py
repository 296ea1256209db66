"""Fixtures for the fault tests: one lab host of their own (faults here must not disturb other tests'
hosts) and a profile whose service is the fake SGLang server (tests/support/fake_sglang.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.hosts import lab_host_name

from .helpers import have_lab_prerequisites
from .hostctl import HostCtl
from .scenario import Scenario


@pytest.fixture(scope="session")
def fault_lab() -> Iterator[Any]:
    reason = have_lab_prerequisites()
    if reason is not None:
        pytest.skip(f"no lab host here: {reason}")
    from k26ctl.lab.host import temporary_lab_host
    from tests.support.tiers import require_slow

    require_slow("a lab host")

    with temporary_lab_host(os.environ.get("K26CTL_FAULTS_LAB") or lab_host_name("faults")) as lab:
        yield lab


@pytest.fixture()
def host(fault_lab: Any) -> Iterator[HostCtl]:
    ctl = HostCtl(fault_lab)
    yield ctl
    # whatever a test broke, the next one starts from a reachable host with a clean link
    ctl.heal()


@pytest.fixture()
def scenario(host: HostCtl, tmp_path: Path) -> Scenario:
    """The host deployed at a known 'old' state, and a changed 'new' profile ready to deploy."""
    sc = Scenario(host, tmp_path)
    sc.establish_old()
    return sc


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The hostile-state suite's count of inputs tried (the closing figure of its report)."""
    import sys

    module = sys.modules.get("tests.faults.test_hostile_state")
    if module is None or not module.TRIED:
        return
    failed = [r for r in terminalreporter.stats.get("failed", []) if "test_hostile_state" in r.nodeid]
    counts = ", ".join(f"{name} {n}" for name, n in sorted(module.TRIED.items()))
    terminalreporter.write_line(
        f"hostile state inputs tried: {sum(module.TRIED.values())} ({counts}); "
        f"{module.OUTCOMES['read']} read, {module.OUTCOMES['refused']} refused with one line; "
        f"failed tests: {len(failed)}"
    )
