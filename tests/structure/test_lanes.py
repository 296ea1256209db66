"""Lanes (tests/support/lanes.py): directories map to lanes, and a session runs the lanes first, longest
first, each in collection order, then the fast tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.lanes import LANES, ORDER, lane_of

REPO = Path(__file__).resolve().parents[2]
pytest_plugins = ["pytester"]

CONFTEST = """
from tests.conftest import pytest_collection_modifyitems
"""


def test_named_prefixes_are_directories_or_files_and_the_real_lanes_run_first() -> None:
    for prefix, _ in LANES:
        assert (REPO / prefix).is_dir() if prefix.endswith("/") else (REPO / prefix).is_file(), prefix
    assert lane_of("tests/lab_real/test_real_fleet.py::test_x") == ORDER[0] == "real-fleet"
    assert lane_of("tests/lab_real/test_real_sglang.py::test_x") == ORDER[1] == "real-sglang"
    assert lane_of("tests/structure/test_lanes.py::test_y") == "other" == ORDER[-1]


def test_a_session_runs_the_lanes_longest_first_then_the_fast_tests(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tests.support.lanes as lanes

    monkeypatch.setattr(lanes, "LANES", (("a/", "long"), ("b/", "short")))
    monkeypatch.setattr(lanes, "ORDER", ["long", "short", "other"])
    pytester.makeconftest(CONFTEST)
    files = {
        "b": "import pytest\n\n@pytest.mark.lab\ndef test_b1():\n    pass\n\ndef test_b_fast():\n    pass\n",
        "a": "import pytest\n\npytestmark = pytest.mark.lab\n\ndef test_a1():\n    pass\n\n"
        "def test_a2():\n    pass\n",
        "c": "import pytest\n\n@pytest.mark.labhost\ndef test_c1():\n    pass\n",
    }
    for directory, body in files.items():
        (pytester.path / directory).mkdir()
        (pytester.path / directory / f"test_{directory}.py").write_text(body)
    result = pytester.runpytest("--collect-only", "-q", "-p", "no:cacheprovider")
    ids = [line.split("::")[1] for line in result.outlines if "::" in line]
    assert ids == ["test_a1", "test_a2", "test_b1", "test_c1", "test_b_fast"], result.outlines
