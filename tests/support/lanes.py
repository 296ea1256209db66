"""Lanes: how the suite spreads over pytest-xdist workers (README's `-n 4 --dist loadgroup`).

Every test that needs a lab host, a lab server or a real SGLang server runs in the lane of its file's
directory (or of the file itself, where it is named), all of a lane on one worker, in collection
order: a lane's session and module fixtures (its lab host, its real-SGLang host, its lab servers) come
up once on that worker and are shared by the lane's tests, as in a run on one worker. Lanes never
share a host: each worker's hosts have names of their own (tests/support/hosts.py). Fast tests have
no lane; whichever worker is free takes them one at a time, which fills the time the lanes spend
waiting on servers.

The suite is bound by CPU on two cores, so the order matters: the lanes start longest first (the
order below, by their measured wall time), and the fast tests come last.
"""

from __future__ import annotations

import pytest

# (path prefix, lane), longest lane first; a path not named here runs in the lane "other". The real
# fleet has a lane of its own: its two real servers and the realsglang lane's one are the most that run.
LANES: tuple[tuple[str, str], ...] = (
    ("tests/lab_real/test_real_fleet.py", "real-fleet"),
    ("tests/lab_real/", "real-sglang"),
    ("tests/smoke/", "host-b"),
    ("tests/fleet/", "host-b"),
    ("tests/sweep/", "host-b"),
    ("tests/remote/", "host-b"),
    ("tests/lab_host/", "host-b"),
    ("tests/bisect/", "host-a"),
    ("tests/deploy/", "host-a"),
    ("tests/watch/", "host-a"),
    ("tests/faults/", "faults"),
    ("tests/lab_server/", "servers"),
    ("tests/conformance/", "servers"),
)
OTHER = "other"
ORDER = list(dict.fromkeys([lane for _, lane in LANES] + [OTHER]))


def lane_of(path: str) -> str:
    for prefix, lane in LANES:
        if path.startswith(prefix):
            return lane
    return OTHER


def assign(items: list[pytest.Item]) -> None:
    """Give every test outside the fast tier its lane (tiers.classify has run), then order the session:
    the lanes in ORDER, each in collection order, then the fast tests (in collection order)."""
    for item in items:
        if item.get_closest_marker("fast") is None and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(lane_of(item.nodeid)))

    def rank(item: pytest.Item) -> int:
        mark = item.get_closest_marker("xdist_group")
        return ORDER.index(mark.args[0]) if mark and mark.args[0] in ORDER else len(ORDER)

    items.sort(key=rank)  # stable: within a lane, and among the fast tests, collection order
