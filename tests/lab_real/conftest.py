"""One real-SGLang lab host per test session (`<K26CTL_TEST_LAB>-r`), shared by every realsglang test.

Its releases come from the machine-wide cache that `bash scripts/bootstrap.sh --real-sglang` fills (CI
does); without them the tests are skipped with that hint. The tests deploy one server at a time on
this host, so at most one real SGLang server runs during the session.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from k26ctl.lab.host import LabHostState
from tests.support.hosts import lab_host_name


def real_host_name() -> str:
    """K26CTL_TEST_REAL_LAB names it outright (a host already up is reused and then removed)."""
    return os.environ.get("K26CTL_TEST_REAL_LAB") or f"{lab_host_name()}-r"[:40]


@pytest.fixture(scope="session")
def real_host() -> Iterator[LabHostState]:
    from k26ctl.lab.host import lab_down, lab_status, lab_up, prerequisite_problem
    from k26ctl.lab.real.releases import RELEASES, installed

    reason = prerequisite_problem()
    if reason:
        pytest.skip(f"lab host unavailable: {reason}")
    present = tuple(v for v in RELEASES if installed(v))
    if RELEASES[0] not in present:  # a test that needs another release skips without it
        pytest.skip(f"real SGLang {RELEASES[0]} not installed: run `bash scripts/bootstrap.sh --real-sglang`")
    name = real_host_name()
    status = lab_status(name)
    reuse = status.running and status.host is not None and RELEASES[0] in status.host.real_sglang
    state = status.host if reuse and status.host is not None else lab_up(name, real_sglang=present)
    try:
        yield state
    finally:
        lab_down(name)
