"""The fast tier (`pytest -m fast`) is decided by the markers and fixtures a test uses, not by a list:
a new test that uses the lab fixtures or markers leaves it with nothing else to do, and one that starts a
lab server without saying so fails instead of slowing the tier down."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

CONFTEST = """
import pytest
from tests.conftest import lab_host, pytest_collection_modifyitems, pytest_runtest_protocol

@pytest.fixture
def deployed(lab_host):
    return lab_host

def pytest_deselected(items):
    for item in items:
        marks = sorted({m.name for m in item.iter_markers()} - {"xdist_group"})
        lane = item.get_closest_marker("xdist_group")
        print(f"DESELECTED {item.nodeid.split('::', 1)[1]} {','.join(marks)} {lane and lane.args[0]}")
"""

TESTS = """
import pytest

def test_plain():
    pass

@pytest.mark.lab
def test_marked_lab():
    pass

@pytest.mark.labhost
def test_marked_labhost():
    pass

@pytest.mark.network_sglang
def test_marked_network_sglang():
    pass

@pytest.mark.realsglang
def test_marked_realsglang():
    pass

def test_uses_the_lab_host(lab_host):
    pass

def test_uses_it_through_another_fixture(deployed):
    pass

class TestMarkedClass:
    pytestmark = pytest.mark.realsglang

    def test_in_class(self):
        pass
"""

MARKED_MODULE = """
import pytest

pytestmark = [pytest.mark.realsglang]

def test_in_a_marked_module():
    pass
"""


def test_the_fast_tier_is_every_test_without_a_lab_marker_or_fixture(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_tiers=TESTS, test_marked_module=MARKED_MODULE)
    result = pytester.runpytest("-m", "fast", "--collect-only", "-q", "-s", "-p", "no:cacheprovider")
    selected = {line.split("::", 1)[1] for line in result.outlines if line.startswith("test_")}
    assert selected == {"test_plain"}, result.outlines
    lines = [line.split() for line in result.outlines if line.startswith("DESELECTED ")]
    deselected = {name: marks for _, name, marks, _ in lines}
    # outside the fast tier every test has a lane (tests/support/lanes.py): here, outside tests/, "other"
    assert {lane for *_, lane in lines} == {"other"}, result.outlines
    assert {name: set(marks.split(",")) for name, marks in deselected.items()} == {
        "test_marked_lab": {"lab"},
        "test_marked_labhost": {"labhost"},
        "test_marked_network_sglang": {"network_sglang"},
        "test_marked_realsglang": {"realsglang"},
        "test_uses_the_lab_host": {"labhost"},  # from the fixture
        "test_uses_it_through_another_fixture": {"labhost"},
        "TestMarkedClass::test_in_class": {"realsglang"},
        "test_in_a_marked_module": {"realsglang"},
    }, result.outlines


def test_a_fast_test_that_starts_a_lab_server_fails_and_says_what_to_mark(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(
        test_sneaky="""
from tests.support.lab_server import start_lab_server

def test_starts_a_server(tmp_path):
    start_lab_server(tmp_path, [])
"""
    )
    basetemp = pytester.path / "basetemp"
    result = pytester.runpytest("-p", "no:cacheprovider", f"--basetemp={basetemp}")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*test_starts_a_server starts a lab server but is in the fast tier; mark*"])
    assert not list(basetemp.rglob("server-*.log")), "the server was started anyway"
