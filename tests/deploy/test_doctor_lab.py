"""`k26ctl doctor` on a real lab host serving the stand-in: the host matches the inventory where the
stand-in follows SGLang, the bundle carries no secret, and `--explain` in a fresh state directory
gives the same rows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.cli import k26_json

from .labdeploy import LAB_PROFILES, lab_sets

PROFILE = str(LAB_PROFILES / "ddtree-b7.yaml")
SECRET = "hf_doctor_lab_secret_value"


def test_doctor_on_the_lab_host_then_its_bundle_explained_elsewhere(lab_host: Any, tmp_path: Path) -> None:
    sets = lab_sets(lab_host, f"service.environment.HF_TOKEN={SECRET}")
    code, deployed = k26_json("deploy", PROFILE, *sets, "--yes")
    assert code == 0, deployed["message"]
    bundle = tmp_path / "doctor.json"
    code, doc = k26_json("doctor", PROFILE, *sets, "--bundle", str(bundle))
    rows = {(r["area"], r["item"]): r for r in doc["rows"]}
    assert code == 0, [r for r in doc["rows"] if r["status"] in ("unreadable", "error")]
    assert (
        rows[("gpu", "GPU")]["status"] == "match"
        and "compute capability 12.0" in rows[("gpu", "GPU")]["seen"]
    )
    assert rows[("sglang", "version")]["status"] == "match"
    assert rows[("patches", "triton-ddtree-verify-width")]["status"] == "match"
    assert rows[("unit", "unit file")]["status"] == "match"
    for item in ("ready", "load-progress", "load-weight-end"):
        assert rows[("journal", item)]["status"] == "match", item
    for item in ("/server_info", "server_info keys", "/v1/models", "/metrics"):
        assert rows[("http", item)]["status"] == "match", item
    text = bundle.read_text()
    assert SECRET not in text and json.loads(text)["facts"]["host"] == doc["host"]

    fresh = {"XDG_STATE_HOME": str(tmp_path / "elsewhere"), "HOME": str(tmp_path / "elsewhere")}
    code, explained = k26_json("doctor", "--explain", str(bundle), env=fresh)
    assert code == 0 and explained["source"] == str(bundle)
    assert explained["rows"] == doc["rows"]
