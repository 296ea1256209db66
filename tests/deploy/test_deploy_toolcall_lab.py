"""On a real lab host: a deploy of the tool-argument fault variant fails its smoke step on the tool-call
check alone, while every plain answer passes the text detectors and the greedy probes."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.cli import k26_json

from .labdeploy import LAB_PROFILES, lab_sets

pytestmark = [pytest.mark.labhost, pytest.mark.lab, pytest.mark.timeout(900)]

TOOLCALL = str(LAB_PROFILES / "ddtree-b7-toolcall.yaml")


def test_tool_argument_fault_fails_the_deploy_on_the_tool_call_check(lab_host: Any) -> None:
    code, doc = k26_json("deploy", TOOLCALL, *lab_sets(lab_host, "smoke.suite=lab-tools"), "--yes", "--smoke")
    smoke = doc["smoke"]
    assert code == 1 and smoke is not None and smoke["passed"] is False, doc.get("error")
    failed = {
        (r["prompt_id"], f["detector"])
        for r in smoke["results"]
        for f in r["findings"]
        if f["severity"] == "fail"
    }
    assert failed == {("weather", "tool_call_arguments"), ("books", "tool_call_arguments")}, failed
    assert smoke["probes"]["verdict"] == "pass", smoke["probes"]
    reasons = [f["message"] for r in smoke["results"] if r["prompt_id"] == "books" for f in r["findings"]]
    assert reasons[0].startswith("arguments of search_books are not JSON: "), reasons
