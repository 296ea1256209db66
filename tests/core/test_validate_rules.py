"""Every validation rule: it fires on the bad case (with its stable code and level) and stays quiet on
the good one."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from k26ctl.errors import ConfigError
from k26ctl.profile import Profile, load_profile
from k26ctl.validate import (
    Finding,
    ValidationReport,
    ensure_valid,
    interpret_verify,
    known_patch_names,
    load_option_table,
    merge_findings,
    missing_executable_line,
    parse_flags,
    validate_profile,
    validate_with_host,
)

PROFILES = Path(__file__).resolve().parents[2] / "profiles"


def profile(name: str = "ddtree-b7", *overrides: str) -> Profile:
    return load_profile(PROFILES / f"{name}.yaml", list(overrides)).profile


def report(name: str = "ddtree-b7", *overrides: str, strict: bool = False) -> ValidationReport:
    return validate_profile(profile(name, *overrides), strict=strict, systemd=False)


def finding(rep: ValidationReport, code: str) -> Finding:
    matches = [f for f in rep.findings if f.code == code]
    assert matches, f"{code} not in {rep.codes()}"
    return matches[0]


def extra(*args: str) -> str:
    return "sglang.extra_args=[" + ", ".join(f"'{a}'" for a in args) + "]"


@pytest.mark.parametrize("name", ["base", "dflash", "ddtree-b7", "ddtree-b16-patched"])
def test_shipped_profiles_have_no_errors_or_warnings(name: str) -> None:
    rep = report(name, "sglang.version=0.5.15")
    assert rep.valid and not rep.errors and not rep.warnings, rep.findings


# ---- the known bug ------------------------------------------------------------------------------


def test_known_bug_fires_for_budget_16_on_triton() -> None:
    rep = report("ddtree-b16")
    f = finding(rep, "known-bug/ddtree-mask-width")
    assert f.level == "warning" and rep.valid
    assert "triton-ddtree-verify-width" in f.hint
    assert "17" in f.message and "8" in f.message


@pytest.mark.parametrize("budget", [1, 3, 6, 8, 16])
def test_known_bug_fires_whenever_width_differs_from_block_size(budget: int) -> None:
    rep = report("ddtree-b7", f"spec.ddtree.budget={budget}")
    assert "known-bug/ddtree-mask-width" in rep.codes()


@pytest.mark.parametrize(
    "overrides",
    [
        (),  # budget 7, block 8: widths agree
        ("spec.ddtree.budget=16", "patches=[triton-ddtree-verify-width]"),
        ("spec.ddtree.budget=16", "sglang.attention_backend=flashinfer"),
        ("spec.ddtree.budget=16", "spec.block_size=17"),
        ("spec.ddtree.budget=16", "spec.algorithm=DFLASH"),
    ],
)
def test_known_bug_quiet_when_it_cannot_happen(overrides: tuple[str, ...]) -> None:
    assert "known-bug/ddtree-mask-width" not in report("ddtree-b7", *overrides).codes()


def test_known_bug_assumes_triton_when_backend_left_to_sglang() -> None:
    rep = report("ddtree-b16", "sglang.attention_backend=null")
    assert "default" in finding(rep, "known-bug/ddtree-mask-width").message


def test_known_bug_sees_flags_passed_through_extra_args() -> None:
    rep = report("ddtree-b7", "spec.ddtree.budget=null", extra("--speculative-ddtree-budget", "16"))
    assert "known-bug/ddtree-mask-width" in rep.codes()


def test_strict_turns_the_warning_into_an_error() -> None:
    rep = report("ddtree-b16", strict=True)
    assert not rep.valid
    assert finding(rep, "known-bug/ddtree-mask-width").level == "error"


# ---- flags against the option table -------------------------------------------------------------


def test_unknown_flag_gets_did_you_mean() -> None:
    """A flag no table knows is a warning that leaves the verdict to the host's own parser."""
    rep = report("base", extra("--enable-metrcs"))
    f = finding(rep, "flags/unknown")
    assert f.level == "warning" and f.hint == "did you mean --enable-metrics?" and rep.valid
    assert "host's own parser" in f.message


def test_abbreviated_flag_is_named_with_its_canonical_form() -> None:
    rep = report("base", "sglang.context_length=null", extra("--context-len", "4096"))
    f = finding(rep, "flags/abbreviated")
    assert f.level == "warning" and f.hint == "write --context-length"


def test_ambiguous_abbreviation_is_an_error() -> None:
    assert finding(report("base", extra("--speculative-d", "x")), "flags/ambiguous").level == "error"


def test_deprecated_flag_names_the_replacement() -> None:
    f = finding(report("base", extra("--disable-cuda-graph")), "flags/deprecated")
    assert f.level == "warning"
    assert "--cuda-graph-backend-{decode,prefill}=disabled" in f.hint and "sglang.cuda_graph" in f.hint


def test_invalid_choice_gets_did_you_mean() -> None:
    f = finding(report("base", "sglang.tool_call_parser=kimi-k2"), "flags/invalid-choice")
    assert f.hint == "did you mean 'kimi_k2'?"


def test_flag_repeated_through_extra_args_is_a_conflict() -> None:
    f = finding(report("base", extra("--tp-size", "4")), "flags/duplicate")
    assert f.level == "error" and "sglang.tp_size" in f.hint


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (("--context-length",), "flags/missing-value"),
        (("stray",), "flags/unexpected-argument"),
        (("--enable-cache-report=yes",), "flags/unexpected-value"),
    ],
)
def test_malformed_extra_args(args: tuple[str, ...], code: str) -> None:
    rep = report("base", "sglang.context_length=null", extra(*args))
    assert finding(rep, code).level == "error"


def test_parse_flags_reads_inline_values_and_nargs() -> None:
    table = load_option_table()
    parsed, findings = parse_flags(["--tp-size=4", "--enable-metrics", "--model", "m"], table)
    assert not findings
    assert parsed.get("tp_size") == "4" and parsed.get("enable_metrics") == "true"
    assert parsed.get("model_path") == "m"  # the --model alias


def test_option_table_comes_from_a_real_release_plus_the_ddtree_pr() -> None:
    table = load_option_table("0.5.15")
    assert table.sglang_version == table.release == "0.5.15"
    assert load_option_table().sglang_version == "0.5.14-0.5.23"  # no version: every release merged
    tp = table.lookup("--tp-size")
    assert tp is not None and "--tensor-parallel-size" in tp.flags
    assert table.lookup("--tp") is None  # only an argparse abbreviation
    budget = table.lookup("--speculative-ddtree-budget")
    assert budget is not None and budget.source == "pr-29907"
    assert "DDTREE" in table.pr_algorithms and "DFLASH" in table.algorithms
    kimi = table.lookup("--tool-call-parser")
    assert kimi is not None and kimi.choices is not None and "kimi_k2" in kimi.choices


# ---- speculative start-up rules -----------------------------------------------------------------


@pytest.mark.parametrize("algorithm", ["DFLASH", "DDTREE", "STANDALONE"])
def test_draft_model_required(algorithm: str) -> None:
    rep = report("ddtree-b7", f"spec.algorithm={algorithm}", "spec.draft_model_path=null")
    assert finding(rep, "spec/draft-model-required").level == "error"


def test_spec_settings_without_algorithm_warn() -> None:
    f = finding(report("dflash", "spec.algorithm=NONE"), "spec/settings-ignored")
    assert "spec.draft_model_path" in f.message and "spec.block_size" in f.message


def test_block_size_must_be_positive() -> None:
    assert finding(report("dflash", "spec.block_size=0"), "spec/block-size-invalid").level == "error"


def test_block_size_flags_must_agree() -> None:
    rep = report("dflash", extra("--speculative-num-draft-tokens", "16"))
    assert finding(rep, "spec/block-size-conflict").level == "error"


def test_block_size_left_to_sglang_warns() -> None:
    assert finding(report("dflash", "spec.block_size=null"), "spec/block-size-inferred").level == "warning"


def test_dflash_block_size_flag_outside_dflash_warns() -> None:
    rep = report(
        "base",
        "spec.algorithm=EAGLE3",
        "spec.draft_model_path=/m",
        extra("--speculative-dflash-block-size", "8"),
    )
    assert "spec/block-size-ignored" in rep.codes()


def test_unknown_algorithm_through_extra_args() -> None:
    rep = report("base", extra("--speculative-algorithm", "DFLASHH"))
    f = finding(rep, "spec/unknown-algorithm")
    assert f.level == "error" and "DFLASH" in f.hint


def test_newer_algorithm_warns_about_the_release() -> None:
    rep = report("dflash", "spec.algorithm=DSPARK", "sglang.version=0.5.15")
    f = finding(rep, "spec/algorithm-version")
    assert f.level == "error" and "0.5.16" in f.message
    assert (
        "spec/algorithm-version"
        not in report("dflash", "spec.algorithm=DSPARK", "sglang.version=0.5.16").codes()
    )


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (("--pp-size", "2"), "dflash/pp-size"),
        (("--enable-dp-attention",), "dflash/dp-attention"),
        (("--speculative-draft-window-size", "4"), "dflash/draft-window"),
    ],
)
def test_dflash_startup_errors(args: tuple[str, ...], code: str) -> None:
    assert finding(report("dflash", extra(*args)), code).level == "error"


def test_dflash_steps_and_topk_are_forced_to_one() -> None:
    rep = report("dflash", "spec.num_steps=3", "spec.eagle_topk=4")
    assert [f.level for f in rep.findings if f.code == "dflash/forced-to-one"] == ["warning", "warning"]


def test_ddtree_budget_required_and_positive() -> None:
    """The branch infers block size - 1 when no budget is given (info, not an error)."""
    rep = report("ddtree-b7", "spec.ddtree.budget=null")
    f = finding(rep, "ddtree/budget-default")
    assert rep.valid and f.level == "info" and "block size - 1 = 7" in f.message
    assert finding(report("ddtree-b7", "spec.ddtree.budget=0"), "ddtree/budget-invalid").level == "error"


def test_ddtree_page_size_must_be_one() -> None:
    assert finding(report("ddtree-b7", "sglang.page_size=16"), "ddtree/page-size").level == "error"
    assert finding(report("ddtree-b7", "sglang.page_size=null"), "ddtree/page-size-unset").level == "warning"


def test_ddtree_overlap_schedule() -> None:
    rep = report("ddtree-b7", "sglang.disable_overlap_schedule=false")
    assert finding(rep, "ddtree/overlap-schedule").level == "warning"


def test_ddtree_rejects_rejection_sampling() -> None:
    rep = report("ddtree-b7", extra("--speculative-use-rejection-sampling"))
    assert finding(rep, "ddtree/rejection-sampling").level == "error"


def test_ddtree_max_topk_and_depth_bonus() -> None:
    assert finding(report("ddtree-b7", "spec.ddtree.max_topk=0"), "ddtree/max-topk-invalid").level == "error"
    rep = report("ddtree-b7", "spec.ddtree.depth_bonus=-0.5")  # documented: wider, shallower trees
    assert rep.valid and "ddtree/depth-bonus-invalid" not in rep.codes()
    rep = report(
        "ddtree-b7", "service.environment={SGLANG_DDTREE_DEPTH_BONUS: deep}", "spec.ddtree.depth_bonus=null"
    )
    assert finding(rep, "ddtree/depth-bonus-invalid").level == "error"


def test_ddtree_settings_ignored_for_other_algorithms() -> None:
    f = finding(report("ddtree-b7", "spec.algorithm=DFLASH"), "ddtree/settings-ignored")
    assert "spec.ddtree.budget" in f.message


def test_ddtree_is_marked_unreleased() -> None:
    assert finding(report("ddtree-b7"), "spec/algorithm-unreleased").level == "info"


# ---- host-shaped rules --------------------------------------------------------------------------


def test_tp_size_sanity() -> None:
    assert finding(report("base", "sglang.tp_size=6"), "sglang/tp-size").level == "warning"
    assert "8 GPUs" in finding(report("base", "sglang.tp_size=16"), "sglang/tp-size").message


def test_attention_backend_unsupported_on_sm120() -> None:
    assert "SM80-SM90" in finding(report("base", "sglang.attention_backend=fa3"), "attention/sm120").message


def test_port_grpc_range() -> None:
    assert finding(report("base", "sglang.port=60000"), "port/grpc-range").level == "error"
    assert (
        "port/grpc-range"
        not in report("base", "sglang.port=60000", "service.environment.SGLANG_GRPC_PORT=1").codes()
    )


def test_port_conflicts() -> None:
    rep = report("base", extra("--grpc-http-sidecar-port", "30000"))
    f = finding(rep, "port/conflict")
    assert f.level == "error" and "--port" in f.message
    assert finding(report("base", "sglang.port=22"), "port/conflict").level == "error"
    assert (
        finding(report("base", "sglang.port=80", "service.user=sglang"), "port/privileged").level == "warning"
    )


def test_secret_rules() -> None:
    assert "secret/literal-api-key" in report("base", extra("--api-key", "x")).codes()
    assert "secret/api-key-env-unset" in report("base", "sglang.api_key_env=K").codes()
    assert (
        "secret/api-key-env-unset"
        not in report("base", "sglang.api_key_env=K", "service.environment_file=/etc/sglang.env").codes()
    )
    assert "secret/literal-environment" in report("base", "service.environment.HF_TOKEN=abc").codes()
    # the env reference itself is not a literal secret
    assert (
        "secret/literal-api-key"
        not in report("base", "sglang.api_key_env=K", "service.environment_file=/e").codes()
    )


def test_environment_overriding_a_profile_key_warns() -> None:
    f = finding(report("base", "service.environment.PATH=/bin"), "env/overrides-profile-key")
    assert f.hint == "set service.path instead"


def test_unit_rules() -> None:
    assert finding(report("base", "service.timeout_start_sec=600"), "unit/timeout-start").level == "warning"
    stand_in = report("base", "service.timeout_start_sec=600", "sglang.entrypoint=k26ctl.lab.serve")
    assert "unit/timeout-start" not in stand_in.codes()  # only real SGLang loads a 590 GB checkpoint
    rep = report("base", "service.start_limit_interval_sec=0")
    assert finding(rep, "unit/restart-unlimited").level == "warning"


def test_render_errors_become_findings() -> None:
    f = finding(report("base", "sglang.python=python3"), "render/invalid")
    assert f.level == "error"


def test_unknown_patch_name() -> None:
    if known_patch_names() is None:
        assert finding(report("base", "patches=[whatever]"), "patches/catalog-missing").level == "info"
        return
    f = finding(report("base", "patches=[triton-ddtree-verify-widht]"), "patches/unknown")
    assert f.level == "error" and "triton-ddtree-verify-width" in f.hint


def test_missing_patch_catalog_is_tolerated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import k26ctl.resources

    monkeypatch.setattr(k26ctl.resources, "templates_dir", lambda: tmp_path)
    assert known_patch_names() is None
    assert finding(report("base", "patches=[anything]"), "patches/catalog-missing").level == "info"


# ---- systemd-analyze ----------------------------------------------------------------------------


def test_interpret_verify_tolerates_only_the_missing_interpreter() -> None:
    missing = missing_executable_line("sglang.service", "/opt/x/python")
    ok = interpret_verify(
        1, missing + "\n", "sglang.service", "/opt/x/python", tolerate_missing_executable=True
    )
    assert [f.code for f in ok] == ["unit/executable-on-host"] and ok[0].level == "info"
    strict = interpret_verify(
        1, missing, "sglang.service", "/opt/x/python", tolerate_missing_executable=False
    )
    assert [f.level for f in strict] == ["error"]
    other = interpret_verify(
        1,
        missing_executable_line("sglang.service", "/bin/other"),
        "sglang.service",
        "/opt/x/python",
        tolerate_missing_executable=True,
    )
    assert [f.code for f in other] == ["unit/systemd-verify"]
    warned = interpret_verify(
        0, "x.service:3: Unknown key 'Foo'", "sglang.service", "/p", tolerate_missing_executable=True
    )
    assert [f.code for f in warned] == ["unit/systemd-verify"]


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_validate_runs_systemd_analyze_on_the_rendered_unit() -> None:
    rep = validate_profile(profile("ddtree-b16-patched"))
    assert "unit/executable-on-host" in rep.codes() and rep.valid
    # with an interpreter that exists here the check is complete, and the unit passes it
    rep = validate_profile(profile("base", f"sglang.python={shutil.which('python3')}"))
    assert "unit/executable-on-host" not in rep.codes() and "unit/systemd-verify" not in rep.codes()


def test_ensure_valid_raises_config_error_with_the_first_error() -> None:
    with pytest.raises(ConfigError) as err:
        ensure_valid(profile("ddtree-b7", "spec.ddtree.budget=0"))
    assert err.value.exit_code == 78 and "ddtree/budget-invalid" in err.value.message
    assert ensure_valid(profile("ddtree-b16")).valid  # warnings only
    with pytest.raises(ConfigError):
        ensure_valid(profile("ddtree-b16"), strict=True)


def test_merge_findings_rejudges() -> None:
    rep = report("base")
    merged = merge_findings(rep, [Finding("error", "remote/unknown-flag", "x", "")])
    assert rep.valid and not merged.valid


def test_host_checks_are_skipped_while_local_errors_remain() -> None:
    """The lab host named here does not exist: contacting it would raise UnreachableError."""
    prof = profile("ddtree-b16", "host.lab=k26-no-such-lab")
    rep = validate_with_host(prof, strict=True)
    assert not rep.valid
    assert finding(rep, "known-bug/ddtree-mask-width").level == "error"
    assert finding(rep, "remote/skipped").level == "info"
