"""`k26ctl render` and `k26ctl validate` through the console entry: exit codes and outputs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from k26ctl.validate import verify_unit_locally
from tests.support.cli import CliResult, run_here


def findings(result: CliResult) -> list[str]:
    return [f["code"] for f in json.loads(result.stdout)["findings"]]


def test_validate_budget_16_reports_the_known_bug() -> None:
    result = run_here("validate", "profiles/ddtree-b16.yaml")
    assert result.returncode == 0, result.stderr
    assert "known-bug/ddtree-mask-width" in result.stdout
    assert "triton-ddtree-verify-width" in result.stdout


@pytest.mark.parametrize("name", ["ddtree-b7", "ddtree-b16-patched"])
def test_validate_budget_7_and_patched_16_do_not(name: str) -> None:
    result = run_here("validate", f"profiles/{name}.yaml", "--json")
    assert result.returncode == 0, result.stderr
    assert "known-bug/ddtree-mask-width" not in findings(result)


def test_validate_json_shape() -> None:
    result = run_here("validate", "profiles/ddtree-b16.yaml", "--json")
    doc = json.loads(result.stdout)
    assert set(doc) == {"kind", "schema_version", "valid", "findings"} and doc["valid"] is True
    assert doc["kind"] == "validate"
    for f in doc["findings"]:
        assert set(f) == {"level", "code", "message", "hint"}
    bug = next(f for f in doc["findings"] if f["code"] == "known-bug/ddtree-mask-width")
    assert bug["level"] == "warning"


def test_validate_strict_fails_on_the_warning() -> None:
    result = run_here("validate", "profiles/ddtree-b16.yaml", "--strict", "--json")
    assert result.returncode == 78
    doc = json.loads(result.stdout)
    assert doc["valid"] is False
    assert {"level": "error", "code": "known-bug/ddtree-mask-width"}.items() <= next(
        f for f in doc["findings"] if f["code"] == "known-bug/ddtree-mask-width"
    ).items()


def test_validate_set_override_fixes_it() -> None:
    result = run_here(
        "validate",
        "profiles/ddtree-b16.yaml",
        "--strict",
        "--json",
        "--set",
        "patches=[triton-ddtree-verify-width]",
    )
    assert result.returncode == 0 and "known-bug/ddtree-mask-width" not in findings(result)


def test_validate_error_exits_78() -> None:
    result = run_here("validate", "profiles/ddtree-b7.yaml", "--set", "spec.ddtree.budget=0")
    assert result.returncode == 78
    assert "ddtree/budget-invalid" in result.stdout


def test_validate_bad_profile_is_one_line_without_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("sglang:\n  tp_szie: 8\n")
    result = run_here("validate", str(bad))
    assert result.returncode == 78
    assert "Traceback" not in result.stderr
    assert (
        "unknown key 'sglang.tp_szie'" in result.stderr and "did you mean 'sglang.tp_size'" in result.stderr
    )
    as_json = run_here("validate", str(bad), "--json")
    assert as_json.returncode == 78 and findings(as_json) == ["profile/invalid"]


def test_render_unit_argv_env_json() -> None:
    unit = run_here("render", "profiles/ddtree-b16.yaml")
    assert (
        unit.returncode == 0
        and "ExecStart=/opt/sglang/venv/bin/python -m sglang.launch_server" in unit.stdout
    )
    argv = run_here("render", "profiles/ddtree-b16.yaml", "--format", "argv")
    assert "--speculative-ddtree-budget 16" in argv.stdout and "--tp-size 8" in argv.stdout
    env = run_here("render", "profiles/ddtree-b16.yaml", "--format", "env")
    assert 'SGLANG_DDTREE_MAX_TOPK="1"' in env.stdout.splitlines()
    doc = json.loads(run_here("render", "profiles/ddtree-b16.yaml", "-f", "json").stdout)
    assert doc["unit_name"] == "sglang.service" and doc["unit_path"] == "/etc/systemd/system/sglang.service"
    assert doc["env"]["SGLANG_DDTREE_MAX_TOPK"] == "1" and doc["argv"][0] == "/opt/sglang/venv/bin/python"


def test_render_set_and_bad_format() -> None:
    result = run_here("render", "ddtree-b16", "-f", "argv", "--set", "spec.ddtree.budget=5")
    assert "--speculative-ddtree-budget 5" in result.stdout
    assert run_here("render", "ddtree-b16", "--format", "yaml").returncode == 2
    unknown = run_here("render", "ddtree-b16", "--set", "sglang.tp=3")
    assert unknown.returncode == 78 and "did you mean 'sglang.tp_size'" in unknown.stderr


def test_render_never_prints_a_literal_secret() -> None:
    result = run_here("render", "base", "--set", "sglang.extra_args=[--api-key, topsecret]", "-f", "unit")
    assert result.returncode == 0 and "topsecret" not in result.stdout


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_systemd_analyze_complaints_become_errors() -> None:
    unit = "[Service]\nExecStart=/bin/true\nRestrat=always\n"
    found = verify_unit_locally(unit, "sglang.service", "/bin/true")
    assert [f.code for f in found] == ["unit/systemd-verify"] and "Restrat" in found[0].message
