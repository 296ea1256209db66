"""Warm restarts by construction: the rendered unit keeps the JIT caches in CacheDirectory=, and the
warm-cache rules fire where a profile, the host's unit or a release change throws them away."""

from __future__ import annotations

from pathlib import Path

from k26ctl.profile import Profile, load_profile
from k26ctl.render import render_launch, render_unit
from k26ctl.validate import ValidationReport, validate_profile
from k26ctl.validate.warm_caches import host_unit_findings, release_change_findings

PROFILES = Path(__file__).resolve().parents[2] / "profiles"


def profile(*overrides: str) -> Profile:
    return load_profile(PROFILES / "ddtree-b7.yaml", list(overrides)).profile


def codes(*overrides: str) -> set[str]:
    report: ValidationReport = validate_profile(profile(*overrides), systemd=False)
    return set(report.codes())


def test_unit_keeps_every_jit_cache_under_its_cache_directory() -> None:
    p = profile()
    unit = render_unit(p)
    name = p.service.name
    assert f"CacheDirectory={name}\n" in unit
    env = render_launch(p).env
    assert env["TRITON_CACHE_DIR"] == f"/var/cache/{name}/triton"
    assert env["TORCHINDUCTOR_CACHE_DIR"] == f"/var/cache/{name}/inductor"
    assert env["SGLANG_DG_CACHE_DIR"] == f"/var/cache/{name}/deep_gemm"
    assert env["SGLANG_CACHE_DIR"] == f"/var/cache/{name}/sglang"
    assert env["TVM_FFI_CACHE_DIR"] == f"/var/cache/{name}/tvm-ffi"  # 0.5.15's JIT kernel builds
    assert env["SGLANG_JIT_CACHE_DIR"] == f"/var/cache/{name}/sglang-jit"  # 0.5.23's
    assert not codes() & {
        "restart/jit-cache-volatile",
        "restart/jit-cache-private-tmp",
        "restart/jit-cache-home",
    }


def test_own_cache_path_replaces_the_cache_directory() -> None:
    p = profile("restart.jit_cache_dir=/data/jit")
    assert "CacheDirectory=" not in render_unit(p)
    assert render_launch(p).env["TRITON_CACHE_DIR"] == "/data/jit/triton"


def test_volatile_cache_paths_are_warned() -> None:
    assert "restart/jit-cache-volatile" in codes("restart.jit_cache_dir=/tmp/jit")
    assert "restart/jit-cache-volatile" in codes("service.environment.TRITON_CACHE_DIR=/dev/shm/triton")


def test_caches_left_to_the_release_under_private_tmp_or_another_home() -> None:
    off = codes("restart.jit_cache=false")
    assert "restart/jit-cache-private-tmp" in off
    assert "restart/jit-cache-private-tmp" not in codes("restart.jit_cache=false", "service.hardening=false")
    assert "restart/jit-cache-home" in codes("restart.jit_cache=false", "service.environment.HOME=/tmp/svc")
    assert "TRITON_CACHE_DIR" not in render_launch(profile("restart.jit_cache=false")).env


def test_loading_flags_render_and_are_checked_per_release() -> None:
    p = profile("restart.loader_threads=16", "restart.loader_prefetch_checkpoints=true")
    argv = render_launch(p).argv
    assert "--weight-loader-prefetch-checkpoints" in argv
    assert (
        argv[argv.index("--model-loader-extra-config") + 1]
        == '{"enable_multithread_load":true,"num_threads":16}'
    )
    assert not codes("restart.loader_threads=16") & {
        "restart/loader-flag-unknown",
        "restart/loader-config-twice",
    }
    twice = codes("restart.loader_threads=16", 'sglang.extra_args=["--model-loader-extra-config", "{}"]')
    assert "restart/loader-config-twice" in twice


def test_dynamic_user_on_the_host_and_release_changes() -> None:
    assert host_unit_findings({"DynamicUser": "yes"}, None, True) == []  # CacheDirectory= follows it
    [found] = host_unit_findings({"DynamicUser": "yes"}, "/data/jit", False)
    assert found.code == "restart/jit-cache-dynamic-user" and "/data/jit" in found.message
    [cold] = release_change_findings("0.5.15", "0.5.23")
    assert cold.code == "restart/release-change-cold" and "0.5.15" in cold.message
    assert release_change_findings("0.5.23", "0.5.23") == [] and release_change_findings(None, "0.5.23") == []
