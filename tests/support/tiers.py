"""The fast tier: every test that needs no lab host, no lab server and no real SGLang server or release.

A test leaves the fast tier by a marker (`labhost`, `lab`, `network_sglang`, `realsglang`, on the test,
its class or its module) or by using a fixture that brings up a lab host (directly or through other
fixtures). Everything else is marked `fast`; `python3 -m pytest -m fast` runs exactly those.

The classification is also enforced where the resources start: a `fast` test that starts a lab server,
brings up a lab host or fetches SGLang release wheels fails at once with what to mark, so a new test
cannot slip into the fast tier by calling a helper directly.
"""

from __future__ import annotations

from collections.abc import Iterable

import pytest

SLOW_MARKERS = ("labhost", "lab", "network_sglang", "realsglang")

# fixture -> the marker a test using it (even through another fixture) gets
FIXTURE_MARKERS = {
    "lab_host": "labhost",
    "fault_lab": "labhost",
}

_current: pytest.Item | None = None
_fast_run = False


def configure(config: pytest.Config) -> None:
    """Note whether this run is the fast tier alone (`-m fast`), the edit-test loop."""
    global _fast_run
    _fast_run = (config.getoption("markexpr", "") or "").replace(" ", "") == "fast"


def fast_run() -> bool:
    return _fast_run


def examples(full: int) -> int:
    """How many inputs a property test tries: `full` in the whole suite (CI), a fifth of it (at least
    10) in a fast-tier run, where a quick answer is the point; the inputs are the same on every run."""
    return max(10, full // 5) if _fast_run else full


def classify(items: Iterable[pytest.Item]) -> None:
    """Add the marker of every lab fixture a test uses, then `fast` to every test left without one."""
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        for fixture, marker in FIXTURE_MARKERS.items():
            if fixture in used and item.get_closest_marker(marker) is None:
                item.add_marker(marker)
        if not any(item.get_closest_marker(m) for m in SLOW_MARKERS):
            item.add_marker("fast")


def entering(item: pytest.Item | None) -> None:
    """The test whose set-up, call or teardown is running now (None between tests)."""
    global _current
    _current = item


def require_slow(resource: str) -> None:
    """Fail the running test if it is in the fast tier but starts `resource`."""
    item = _current
    if item is not None and item.get_closest_marker("fast") is not None:
        pytest.fail(
            f"{item.nodeid} starts {resource} but is in the fast tier; mark it "
            f"({', '.join(SLOW_MARKERS)}) or use the lab_host fixture",
            pytrace=False,
        )
