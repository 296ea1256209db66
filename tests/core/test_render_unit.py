"""Rendering: canonical flags, the environment, the unit's settings, quoting, secrets."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from k26ctl.errors import ConfigError
from k26ctl.profile import Profile, SpecAlgorithm, load_profile
from k26ctl.render import (
    render_launch,
    render_unit,
    rendered_document,
    unit_name,
    unit_path,
)
from k26ctl.unitfile import (
    environment_from_unit,
    exec_start_argv,
    parse_exec_start,
    quote_exec_word,
    unit_settings,
)

PROFILES = Path(__file__).resolve().parents[2] / "profiles"
SYSTEMD_ANALYZE = shutil.which("systemd-analyze")


def profile(name: str = "ddtree-b16", *overrides: str) -> Profile:
    return load_profile(PROFILES / f"{name}.yaml", list(overrides)).profile


def settings(unit: str, section: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for sec, key, value in unit_settings(unit):
        if sec == section:
            out.setdefault(key, []).append(value)
    return out


def flag_value(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


# ---- argv ---------------------------------------------------------------------------------------


def test_argv_starts_with_python_m_entrypoint() -> None:
    spec = render_launch(profile("base"))
    assert spec.argv[:3] == ["/opt/sglang/venv/bin/python", "-m", "sglang.launch_server"]


def test_canonical_tp_flag_only() -> None:
    argv = render_launch(profile("base")).argv
    assert flag_value(argv, "--tp-size") == "8"
    assert "--tp" not in argv and "--tensor-parallel-size" not in argv


@pytest.mark.parametrize(
    ("algorithm", "flag", "absent"),
    [
        ("DFLASH", "--speculative-dflash-block-size", "--speculative-num-draft-tokens"),
        ("DDTREE", "--speculative-dflash-block-size", "--speculative-num-draft-tokens"),
        ("EAGLE3", "--speculative-num-draft-tokens", "--speculative-dflash-block-size"),
        ("STANDALONE", "--speculative-num-draft-tokens", "--speculative-dflash-block-size"),
    ],
)
def test_exactly_one_block_size_flag(algorithm: str, flag: str, absent: str) -> None:
    argv = render_launch(profile("ddtree-b7", f"spec.algorithm={algorithm}")).argv
    assert argv.count(flag) == 1 and flag_value(argv, flag) == "8"
    assert absent not in argv


def test_ddtree_budget_flag_and_environment() -> None:
    spec = render_launch(profile("ddtree-b16", "spec.ddtree.depth_bonus=0.2"))
    assert flag_value(spec.argv, "--speculative-algorithm") == "DDTREE"
    assert flag_value(spec.argv, "--speculative-ddtree-budget") == "16"
    assert spec.env["SGLANG_DDTREE_MAX_TOPK"] == "1"
    assert spec.env["SGLANG_DDTREE_DEPTH_BONUS"] == "0.2"
    assert not any(w.startswith("SGLANG_DDTREE") for w in spec.argv)


def test_ddtree_settings_not_rendered_for_other_algorithms() -> None:
    spec = render_launch(profile("ddtree-b16", "spec.algorithm=DFLASH"))
    assert "--speculative-ddtree-budget" not in spec.argv
    assert "SGLANG_DDTREE_MAX_TOPK" not in spec.env


def test_no_speculative_flags_without_algorithm() -> None:
    argv = render_launch(profile("base")).argv
    assert not [w for w in argv if w.startswith("--speculative")]


def test_cuda_graph_disabled_uses_the_non_deprecated_flags() -> None:
    argv = render_launch(profile("base", "sglang.cuda_graph=disabled", "sglang.cuda_graph_max_bs=32")).argv
    assert flag_value(argv, "--cuda-graph-backend-decode") == "disabled"
    assert flag_value(argv, "--cuda-graph-backend-prefill") == "disabled"
    assert "--disable-cuda-graph" not in argv and "--cuda-graph-max-bs-decode" not in argv


def test_bool_flags_only_when_true() -> None:
    on = render_launch(profile("ddtree-b7")).argv
    off = render_launch(
        profile(
            "ddtree-b7",
            "sglang.trust_remote_code=false",
            "sglang.enable_metrics=false",
            "sglang.disable_overlap_schedule=false",
        )
    ).argv
    for flag in ("--trust-remote-code", "--enable-metrics", "--disable-overlap-schedule"):
        assert flag in on and flag not in off
    assert "false" not in off and "true" not in on


def test_unset_options_are_not_rendered() -> None:
    argv = render_launch(profile("base", "sglang.context_length=null", "sglang.attention_backend=null")).argv
    assert "--context-length" not in argv and "--attention-backend" not in argv


def test_extra_args_are_appended_verbatim() -> None:
    argv = render_launch(profile("base", "sglang.extra_args=[--enable-cache-report, --x, 'a b']")).argv
    assert argv[-3:] == ["--enable-cache-report", "--x", "a b"]


def test_environment_has_path_cuda_home_and_profile_entries() -> None:
    env = render_launch(profile("base", "service.environment.HF_HUB_OFFLINE=1")).env
    assert env["PATH"].startswith("/opt/sglang/venv/bin:")
    assert env["CUDA_HOME"] == "/usr/local/cuda"
    assert env["SGLANG_ENABLE_JIT_DEEPGEMM"] == "0" and env["HF_HUB_OFFLINE"] == "1"


# ---- unit ---------------------------------------------------------------------------------------


def test_unit_settings_a_real_sglang_service_needs() -> None:
    unit = render_unit(profile("ddtree-b16"))
    u, s, i = settings(unit, "Unit"), settings(unit, "Service"), settings(unit, "Install")
    assert u["StartLimitBurst"] == ["3"] and u["StartLimitIntervalSec"] == ["7200"]
    assert s["Type"] == ["simple"] and s["Restart"] == ["on-failure"]
    assert int(s["TimeoutStartSec"][0]) >= 1800
    # SGLang drains on SIGTERM (sigterm_watchdog); only the main process gets it, so the drain finishes
    assert s["KillSignal"] == ["SIGTERM"] and s["KillMode"] == ["mixed"] and s["TimeoutStopSec"] == ["360"]
    assert s["LimitNOFILE"] == ["65536"]
    assert s["SyslogIdentifier"] == ["sglang"]
    assert i["WantedBy"] == ["multi-user.target"]
    env = environment_from_unit(unit)
    assert env["PATH"].startswith("/opt/sglang/venv/bin") and env["CUDA_HOME"] == "/usr/local/cuda"
    assert env["SGLANG_DDTREE_MAX_TOPK"] == "1"
    assert "User" not in s and "EnvironmentFile" not in s


def test_unit_execstart_round_trips_to_the_launch_argv() -> None:
    p = profile("ddtree-b16")
    assert exec_start_argv(render_unit(p)) == render_launch(p).argv


def test_user_group_workdir_envfile_when_set() -> None:
    p = profile(
        "base",
        "service.user=sglang",
        "service.group=gpu",
        "service.working_directory=/srv/sglang",
        "service.environment_file=/etc/sglang/sglang.env",
        "service.timeout_start_sec=3600",
    )
    s = settings(render_unit(p), "Service")
    assert s["User"] == ["sglang"] and s["Group"] == ["gpu"]
    assert s["WorkingDirectory"] == ["/srv/sglang"] and s["EnvironmentFile"] == ["/etc/sglang/sglang.env"]
    assert s["TimeoutStartSec"] == ["3600"]


def test_hardening_can_be_turned_off() -> None:
    hardened = settings(render_unit(profile("base")), "Service")
    plain = settings(render_unit(profile("base", "service.hardening=false")), "Service")
    for key in ("NoNewPrivileges", "PrivateTmp", "ProtectSystem"):
        assert key in hardened and key not in plain
    # nothing that would hide the GPUs or forbid JIT kernels
    for key in ("PrivateDevices", "MemoryDenyWriteExecute", "DevicePolicy", "ProtectClock"):
        assert key not in hardened


def test_unit_name_and_path() -> None:
    p = profile("base", "service.name=sglang-k26", "service.unit_dir=/etc/systemd/system/")
    assert unit_name(p) == "sglang-k26.service"
    assert unit_path(p) == "/etc/systemd/system/sglang-k26.service"


def test_specifiers_in_free_text_are_escaped() -> None:
    unit = render_unit(profile("base", "service.description=100% Kimi", "service.syslog_identifier=k%n"))
    assert settings(unit, "Unit")["Description"] == ["100%% Kimi"]
    assert settings(unit, "Service")["SyslogIdentifier"] == ["k%%n"]


# ---- quoting ------------------------------------------------------------------------------------

NASTY = [
    "plain",
    "with space",
    "  leading and trailing  ",
    "",
    "100%",
    "%n%i%%",
    "$HOME",
    "${HOME}",
    "$$",
    "a\\b",
    "trailing\\",
    'double"quote',
    "single'quote",
    "'\"mixed\"'",
    ";",
    "semi;colon",
    "ünïcödé ✓ 模型",
    "-dash",
    "@at",
    "--flag=va lue",
    "#not-a-comment",
]


@pytest.mark.parametrize("word", NASTY)
def test_quote_round_trips(word: str) -> None:
    line = "/usr/bin/python " + quote_exec_word(word)
    assert parse_exec_start(line, {"HOME": "/root"}) == ["/usr/bin/python", word]


def test_nasty_extra_args_round_trip_through_the_unit() -> None:
    p = profile("base").model_copy(deep=True)
    p.sglang.extra_args = NASTY
    unit = render_unit(p)
    assert exec_start_argv(unit, {"HOME": "/root"})[-len(NASTY) :] == NASTY
    assert len([1 for sec, key, _ in unit_settings(unit) if key == "ExecStart"]) == 1


def test_environment_values_round_trip() -> None:
    values = {"A": "x y", "B": "$HOME", "C": "50%", "D": 'q"\\', "E": "", "F": "ü"}
    p = profile("base").model_copy(deep=True)
    p.service.environment = values
    env = environment_from_unit(render_unit(p))
    assert {k: env[k] for k in values} == values


@pytest.mark.parametrize("bad", ["a\nb", "a\rb", "a\x00b", "a\x1bb", "a\x85b", "a\u2028b", "tab\there"])
def test_render_refuses_control_characters_even_past_the_model(bad: str) -> None:
    # model_copy(update=) skips validation: render must still refuse on its own.
    p = profile("base")
    for broken in (
        p.model_copy(update={"sglang": p.sglang.model_copy(update={"extra_args": [bad]})}),
        p.model_copy(update={"sglang": p.sglang.model_copy(update={"model_path": bad})}),
        p.model_copy(update={"service": p.service.model_copy(update={"environment": {"X": bad}})}),
        p.model_copy(update={"service": p.service.model_copy(update={"description": bad})}),
    ):
        with pytest.raises(ConfigError):
            render_unit(broken)


@pytest.mark.parametrize(
    "python",
    [
        "python3",
        "relative/python",
        '/opt/a b/py"thon',
        "/opt/it's/python",
        "/opt/x\\y/python",
        "/opt/$x/python",
        "/opt/../python",
        "/opt//python",
        "/opt/python/",
    ],
)
def test_executable_path_systemd_would_refuse_or_rewrite(python: str) -> None:
    with pytest.raises(ConfigError):
        render_launch(profile("base", f"sglang.python={python}"))


@pytest.mark.parametrize("name", ["1BAD", "A-B", "A B"])
def test_bad_environment_names_are_refused(name: str) -> None:
    p = profile("base").model_copy(deep=True)
    p.service.environment = {name: "1"}
    with pytest.raises(ConfigError):
        render_unit(p)


# ---- secrets ------------------------------------------------------------------------------------


def test_api_key_env_is_the_one_unescaped_expansion() -> None:
    p = profile("base", "sglang.api_key_env=SGLANG_API_KEY", "service.environment_file=/etc/sglang/key.env")
    unit = render_unit(p)
    assert "--api-key ${SGLANG_API_KEY}" in unit
    assert exec_start_argv(unit, {"SGLANG_API_KEY": "s3cr3t value"})[-2:] == ["--api-key", "s3cr3t value"]
    spec = render_launch(p)
    assert spec.env_refs == {len(spec.argv) - 1: "SGLANG_API_KEY"}


def test_literal_secrets_are_redacted_in_every_output_format() -> None:
    p = profile(
        "base",
        "sglang.extra_args=[--api-key, hunter2, --admin-api-key=hunter3]",
        "service.environment.HF_TOKEN=hf_secret",
    )
    assert "hunter2" in render_unit(p)  # the real unit must carry what the service needs
    for fmt in ("unit", "argv", "env", "json"):
        text = rendered_document(p, fmt)
        assert "hunter2" not in text and "hunter3" not in text and "hf_secret" not in text, fmt
    assert '--api-key "***"' in rendered_document(p, "unit")


# ---- systemd itself -----------------------------------------------------------------------------

needs_systemd = pytest.mark.skipif(SYSTEMD_ANALYZE is None, reason="systemd-analyze is not installed")


def _verify(tmp_path: Path, unit: str, name: str = "sglang.service") -> subprocess.CompletedProcess[str]:
    path = tmp_path / name
    path.write_text(unit, encoding="utf-8")
    return subprocess.run(
        [str(SYSTEMD_ANALYZE), "verify", "--man=no", str(path)], capture_output=True, text=True, check=False
    )


@needs_systemd
@pytest.mark.parametrize("name", ["base", "dflash", "ddtree-b7", "ddtree-b16", "ddtree-b16-patched"])
def test_shipped_units_pass_systemd_analyze(tmp_path: Path, name: str) -> None:
    python = tmp_path / "bin" / "python"
    python.parent.mkdir()
    python.write_text("#!/bin/sh\n")
    python.chmod(0o755)
    p = profile(
        name,
        f"sglang.python={python}",
        "service.user=root",
        "service.environment_file=/etc/x.env",
        "service.working_directory=/tmp",
        "sglang.api_key_env=KEY",
    )
    p.sglang.extra_args = NASTY
    result = _verify(tmp_path, render_unit(p))
    assert (result.returncode, result.stderr) == (0, "")


@needs_systemd
@pytest.mark.parametrize(
    "component", ["a b", "50%", "%n", "ünï ✓", "semi;colon", "x  y", "-m", "#h", "a*b?[c]"]
)
def test_systemd_reads_the_executable_path_we_wrote(tmp_path: Path, component: str) -> None:
    """systemd-analyze verify checks the ExecStart executable exists: if our quoting of the path were
    wrong, it would look for another file and fail. A real round trip through systemd's parser."""
    python = tmp_path / component / "python"
    python.parent.mkdir()
    python.write_text("#!/bin/sh\n")
    python.chmod(0o755)
    p = profile("ddtree-b16", f"sglang.python={python}")
    result = _verify(tmp_path, render_unit(p))
    assert (result.returncode, result.stderr) == (0, "")
    # and the control: a file that is not there is reported, so the check can fail
    missing = profile("ddtree-b16", f"sglang.python={tmp_path / component / 'nothere'}")
    assert "not executable" in _verify(tmp_path, render_unit(missing)).stderr


def test_spec_algorithm_enum_covers_sglang_builtins() -> None:
    names = {a.value for a in SpecAlgorithm}
    assert {"NONE", "EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH", "DDTREE"} <= names
