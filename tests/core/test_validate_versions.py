"""Validation follows the host's SGLang release (sglang.version), and the DDTree branch's own rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from k26ctl.errors import ConfigError
from k26ctl.profile import Profile, load_profile
from k26ctl.validate import Finding, ValidationReport, collect_findings, load_catalog, validate_profile
from k26ctl.validate.findings import finish
from tests.support.cli import CliResult, run_k26ctl

ROOT = Path(__file__).resolve().parents[2]


def profile(name: str, *overrides: str) -> Profile:
    return load_profile(ROOT / "profiles" / f"{name}.yaml", list(overrides)).profile


def report(name: str, *overrides: str) -> ValidationReport:
    return validate_profile(profile(name, *overrides), systemd=False)


def finding(rep: ValidationReport | list[Finding], code: str) -> Finding:
    findings = rep.findings if isinstance(rep, ValidationReport) else rep
    matches = [f for f in findings if f.code == code]
    assert matches, f"{code} not in {[f.code for f in findings]}"
    return matches[0]


def extra(*args: str) -> str:
    return "sglang.extra_args=[" + ", ".join(f"'{a}'" for a in args) + "]"


# ---- one table per release ----------------------------------------------------------------------


def test_the_catalog_holds_every_release_from_0_5_14_to_0_5_23() -> None:
    catalog = load_catalog()
    assert catalog.releases == [f"0.5.{n}" for n in range(14, 24)]
    assert len(catalog.tables["0.5.23"]) > len(catalog.tables["0.5.15"]) > len(catalog.tables["0.5.14"])
    assert "DSPARK" not in catalog.algorithms["0.5.15"] and "DSPARK" in catalog.algorithms["0.5.16"]
    assert "UNO" in catalog.algorithms["0.5.20"] and "UNO" not in catalog.algorithms["0.5.19"]


def test_a_newer_value_passes_on_the_release_that_has_it() -> None:
    rep = report("base", "sglang.version=0.5.23", "sglang.kv_cache_dtype=nvfp4")
    assert rep.valid and not rep.errors and not rep.warnings, rep.findings


def test_the_same_value_names_the_release_that_lacks_it() -> None:
    rep = report("base", "sglang.version=0.5.15", "sglang.kv_cache_dtype=nvfp4")
    f = finding(rep, "flags/invalid-choice")
    assert not rep.valid and f.level == "error"
    assert "'nvfp4' is not a choice in SGLang 0.5.15" in f.message and "0.5.16" in f.message


def test_a_choice_a_later_release_dropped() -> None:
    rep = report("base", "sglang.version=0.5.23", "sglang.kv_cache_dtype=fp4_e2m1")
    f = finding(rep, "flags/invalid-choice")
    assert "not a choice in SGLang 0.5.23" in f.message and "0.5.14-0.5.20" in f.message


def test_a_removed_flag_says_which_release_removed_it() -> None:
    rep = report("base", "sglang.version=0.5.23", extra("--stream-output"))
    f = finding(rep, "flags/removed")
    assert f.level == "error" and "removed in SGLang 0.5.20 (last in 0.5.19)" in f.message
    assert "flags/removed" not in report("base", "sglang.version=0.5.15", extra("--stream-output")).codes()


def test_a_removed_flag_that_is_now_an_abbreviation_is_ambiguous_and_says_so() -> None:
    f = finding(report("base", "sglang.version=0.5.23", extra("--cuda-graph-max-bs", "8")), "flags/ambiguous")
    assert "--cuda-graph-max-bs-decode" in f.message and "removed in SGLang 0.5.20" in f.message


def test_a_flag_newer_than_the_host_names_its_first_release() -> None:
    rep = report("base", "sglang.version=0.5.15", extra("--enable-http-worker-reuseport"))
    f = finding(rep, "flags/not-in-release")
    assert "new in SGLang 0.5.23" in f.message and "0.5.15" in f.message
    assert report("base", "sglang.version=0.5.23", extra("--enable-http-worker-reuseport")).valid


def test_an_unknown_flag_defers_to_the_host_parser_for_every_version() -> None:
    for version in ("0.5.15", "0.5.23", None):
        overrides = [extra("--enable-frobnication")]
        if version:
            overrides.append(f"sglang.version={version}")
        rep = report("base", *overrides)
        assert rep.valid and finding(rep, "flags/unknown").level == "warning"


def test_without_a_version_every_release_counts_and_an_info_says_so() -> None:
    rep = report("base", "sglang.kv_cache_dtype=nvfp4", extra("--stream-output"))
    assert rep.valid and not rep.errors
    assert "0.5.14-0.5.23" in finding(rep, "sglang/version-unset").message


def test_versions_between_or_beyond_the_tables() -> None:
    catalog = load_catalog()
    assert catalog.resolve("0.5.23.post1").release == "0.5.23"
    newer = catalog.resolve("0.6.2")
    assert newer.release == "0.5.23" and "0.6.2" in newer.note
    rep = report("base", "sglang.version=0.6.2")
    assert "0.5.23" in finding(rep, "sglang/version-table").message
    with pytest.raises(ConfigError):
        profile("base", "sglang.version=latest")


# ---- DDTree, as the branch enforces it ----------------------------------------------------------


def test_ddtree_without_a_budget_is_valid_and_the_known_bug_uses_the_default() -> None:
    rep = report("ddtree-b16", "spec.ddtree.budget=null", "sglang.version=0.5.15")
    assert rep.valid and not rep.warnings, rep.findings
    assert "block size - 1 = 7" in finding(rep, "ddtree/budget-default").message


def test_full_tree_budget_needs_triton_for_prefill_and_decode() -> None:
    rep = report("ddtree-b16-patched", "sglang.attention_backend=flashinfer")
    f = finding(rep, "ddtree/full-tree-backend")
    assert f.level == "error" and "prefill flashinfer" in f.message
    rep = report("ddtree-b16-patched", extra("--decode-attention-backend", "flashinfer"))
    assert "decode flashinfer" in finding(rep, "ddtree/full-tree-backend").message
    assert "ddtree/full-tree-backend" not in report("ddtree-b16-patched").codes()
    # spine mode (budget <= block - 1) runs on any backend
    assert (
        "ddtree/full-tree-backend" not in report("ddtree-b7", "sglang.attention_backend=flashinfer").codes()
    )


def test_a_colon_in_the_served_model_name_is_refused() -> None:
    f = finding(report("base", "sglang.served_model_name=kimi:k2.6"), "sglang/served-name-colon")
    assert f.level == "error"
    f = finding(
        report("base", "sglang.model_path=org/model:v1", "sglang.served_model_name=null"),
        "sglang/served-name-colon",
    )
    assert "sglang.model_path" in f.hint


def test_python_dash_m_sglang_is_refused() -> None:
    f = finding(report("base", "sglang.entrypoint=sglang"), "sglang/entrypoint")
    assert f.level == "error" and "sglang.launch_server" in f.hint


def test_known_bug_is_keyed_on_the_hosts_tree() -> None:
    bug = finding(report("ddtree-b16", "sglang.version=0.5.15"), "known-bug/ddtree-mask-width")
    assert bug.level == "warning" and "SGLang 0.5.15" in bug.message
    fixed = report("ddtree-b16", "sglang.version=0.5.21")
    assert "known-bug/ddtree-mask-width" not in fixed.codes()
    assert "0.5.17" in finding(fixed, "known-bug/ddtree-mask-width-lifted").message


def test_known_bug_is_lifted_when_the_hosts_patch_check_says_not_needed() -> None:
    findings, _ = collect_findings(
        profile("ddtree-b16", "sglang.version=0.5.15"),
        systemd=False,
        host_patches={"triton-ddtree-verify-width": "not-needed"},
    )
    rep = finish(findings, strict=False)
    assert "known-bug/ddtree-mask-width" not in rep.codes()
    assert "not needed" in finding(rep, "known-bug/ddtree-mask-width-lifted").message


def test_the_must_show_commands_through_the_cli() -> None:
    def validate(version: str) -> CliResult:
        argv = ["validate", "profiles/base.yaml"]
        argv += ["--set", f"sglang.version={version}", "--set", "sglang.kv_cache_dtype=nvfp4"]
        return run_k26ctl(*argv, env={"COLUMNS": "200"}, cwd=ROOT)

    new = validate("0.5.23")
    lines = new.stdout.splitlines()
    assert new.returncode == 0 and "(0 error(s)" in lines[-1], new.stdout + new.stderr
    assert not [line for line in lines if line.startswith("error")]
    old = validate("0.5.15")
    assert old.returncode == 78 and "not a choice in SGLang 0.5.15" in old.stdout + old.stderr
