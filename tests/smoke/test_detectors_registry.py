"""The registry is the one list of detectors: every detector function of a family module has a row,
every row's thresholds are what its function takes, and the kind profiles' fields are all read."""

from __future__ import annotations

import dataclasses
import importlib
import inspect

from k26ctl.smoke.detectors import score_text
from k26ctl.smoke.detectors.registry import DETECTORS, FAMILY_OF_FINDING
from k26ctl.smoke.kinds import KindProfile

FAMILIES = ("characters", "loops", "shortloops", "words", "scripts", "template", "structure")


def test_every_detector_function_has_exactly_one_row() -> None:
    registered = [row.function for row in DETECTORS]
    for family in FAMILIES:
        module = importlib.import_module(f"k26ctl.smoke.detectors.{family}")
        for name, function in inspect.getmembers(module, inspect.isfunction):
            if name.startswith("detect_") and function.__module__ == module.__name__:
                assert registered.count(function) == 1, name
                (row,) = [r for r in DETECTORS if r.function is function]
                assert row.family == family, name
    assert len({row.name for row in DETECTORS}) == len(DETECTORS)


def test_rows_pass_exactly_the_thresholds_their_function_takes() -> None:
    for row in DETECTORS:
        keyword_only = {
            p.name
            for p in inspect.signature(row.function).parameters.values()
            if p.kind is inspect.Parameter.KEYWORD_ONLY
        }
        assert set(row.thresholds) == keyword_only, row.name
        assert set(row.candidates) <= set(row.thresholds), row.name
        for key, values in row.candidates.items():
            assert row.thresholds[key] in values, (row.name, key)


def test_every_kind_profile_field_is_read_by_a_row() -> None:
    fields = {f.name for f in dataclasses.fields(KindProfile)} - {"name"}
    read = {name for row in DETECTORS for name in row.kind_fields}
    assert read <= fields
    assert fields == read


def test_json_findings_name_their_family() -> None:
    verdict = score_text("GGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGG")
    families = {f["detector"]: f["family"] for f in verdict.to_json()["findings"]}
    assert families["char_run"] == "characters"
    assert FAMILY_OF_FINDING["role_leak"] == "template"
