"""On a real lab host: deploy's smoke step, run after every speculative change, judges with the greedy
self-consistency probes (prefix cache flushed through the SSH forward), and the broken variants fail."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.cli import k26_json

from .labdeploy import LAB_PROFILES, PATCHED, UNPATCHED, lab_sets

pytestmark = [pytest.mark.labhost, pytest.mark.lab, pytest.mark.timeout(900)]

SUBTLE = str(LAB_PROFILES / "ddtree-b7-subtle.yaml")


def deploy_probes(lab: Any, profile: str, *more: str) -> tuple[int, dict[str, Any]]:
    code, doc = k26_json("deploy", profile, *lab_sets(lab, *more), "--yes", "--smoke")
    assert doc["smoke"] is not None, doc
    probes: dict[str, Any] = doc["smoke"]["probes"]
    assert probes["flushed"] is True and probes["checked"] > 0, probes
    return code, probes


def test_probes_judge_each_speculative_deploy(lab_host: Any) -> None:
    code, probes = deploy_probes(lab_host, UNPATCHED)
    assert code == 1 and probes["verdict"] == "fail" and probes["first_mismatch"]["position"] < 8

    # mask-only corrupts only a request that shares its verify batch with another: the quick suite's two
    # greedy requests do not always meet, the lab suite's twenty at concurrency 2 do
    code, probes = deploy_probes(
        lab_host,
        UNPATCHED,
        "service.environment.K26LAB_BUG_SCOPE=mask-only",
        "service.environment.K26LAB_UNVISITED=stale",
        "smoke.suite=lab",
    )
    assert code == 1 and probes["verdict"] == "fail", probes

    code, probes = deploy_probes(lab_host, SUBTLE, "smoke.suite=lab")
    assert code == 1 and probes["verdict"] == "fail", probes

    code, probes = deploy_probes(lab_host, PATCHED)
    assert code == 0 and probes["verdict"] == "pass" and probes["mismatches"] == 0, probes
