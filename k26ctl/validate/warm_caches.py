"""Rules that keep restarts warm: JIT kernel caches that survive the process, the release's own loading
flags, and a word when the next start will be cold anyway.

A cold Triton/Inductor/DeepGEMM cache costs minutes per start on a GPU (Triton autotuning during graph
capture, DeepGEMM's JIT). Their default places are under HOME (`~/.triton/cache`, `~/.cache/deep_gemm`,
`~/.cache/sglang`) and /tmp (`/tmp/torchinductor_<user>`): a unit with PrivateTmp=yes, another HOME or
DynamicUser=yes throws them away on every restart. k26ctl's units keep them under CacheDirectory=
(`restart.jit_cache`); these rules warn where a profile or the host's unit undoes that.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from k26ctl.render import JIT_CACHE_VARS, jit_cache_root
from k26ctl.validate.context import Context
from k26ctl.validate.findings import Finding
from k26ctl.validate.registry import rule

VOLATILE_PREFIXES = ("/tmp", "/var/tmp", "/dev/shm", "/run")
# The release's loading flags k26ctl renders from `restart.*`, checked against the release's table.
LOADER_FLAGS = {
    "loader_prefetch_checkpoints": "--weight-loader-prefetch-checkpoints",
    "loader_threads": "--model-loader-extra-config",
}


def _volatile(path: str) -> bool:
    return any(path == p or path.startswith(p + "/") for p in VOLATILE_PREFIXES)


@rule
def jit_caches_persist(ctx: Context) -> Iterator[Finding]:
    profile = ctx.profile
    env = ctx.launch.env
    hardening = profile.service.hardening
    for var in JIT_CACHE_VARS:
        path = env.get(var)
        if path and _volatile(path):
            when = (
                "on every restart (PrivateTmp=yes)" if hardening and path.startswith("/tmp") else "at reboot"
            )
            yield Finding(
                "warning",
                "restart/jit-cache-volatile",
                f"{var}={path} is thrown away {when}: the next start compiles its kernels again",
                "leave the cache to restart.jit_cache (CacheDirectory=) or point it at a persistent disk",
            )
    if jit_cache_root(profile) is not None:
        return
    if hardening and "TORCHINDUCTOR_CACHE_DIR" not in env:
        yield Finding(
            "warning",
            "restart/jit-cache-private-tmp",
            "restart.jit_cache is off and the unit has PrivateTmp=yes: Inductor's cache "
            "(/tmp/torchinductor_<user>) is new and empty on every start",
            "turn restart.jit_cache on, or set TORCHINDUCTOR_CACHE_DIR to a persistent directory",
        )
    home = env.get("HOME")
    if home is not None:
        gone = " and thrown away" if _volatile(home) else ""
        yield Finding(
            "warning",
            "restart/jit-cache-home",
            f"restart.jit_cache is off and HOME={home}: Triton's, DeepGEMM's and SGLang's caches move "
            f"under it{gone}; the first start after the change is cold",
            "turn restart.jit_cache on so the caches stay in one persistent place",
        )


@rule
def loader_flags_known(ctx: Context) -> Iterator[Finding]:
    """The loading flags exist in the release the profile targets (SGLang's own option table)."""
    restart = ctx.profile.restart
    for field, flag in LOADER_FLAGS.items():
        if getattr(restart, field) in (None, False):
            continue
        if ctx.table.lookup(flag) is None:
            yield Finding(
                "error",
                "restart/loader-flag-unknown",
                f"restart.{field} renders {flag}, which SGLang {ctx.table.sglang_version} does not have",
                "remove it for this release",
            )
    if len(ctx.args.values.get("model_loader_extra_config", [])) > 1:
        yield Finding(
            "error",
            "restart/loader-config-twice",
            "--model-loader-extra-config is given twice (restart.loader_threads and sglang.extra_args?)",
            "keep one of them",
        )


def host_unit_findings(
    props: Mapping[str, str], jit_cache_dir: str | None, uses_cache_directory: bool
) -> list[Finding]:
    """What the host's unit (with its drop-ins, as `systemctl show` reports it) does to the caches."""
    findings: list[Finding] = []
    if props.get("DynamicUser") == "yes" and not uses_cache_directory:
        where = f"{jit_cache_dir} is not writable by the dynamic user" if jit_cache_dir else "HOME is /"
        findings.append(
            Finding(
                "warning",
                "restart/jit-cache-dynamic-user",
                f"the host's unit runs with DynamicUser=yes: {where}, so the JIT caches cannot be kept",
                "let restart.jit_cache use CacheDirectory= (leave restart.jit_cache_dir unset)",
            )
        )
    return findings


def release_change_findings(previous: str | None, current: str | None) -> list[Finding]:
    """A start on another release than the last one compiles its kernels again (the caches are keyed by
    the Triton and torch builds that release brings)."""
    if not previous or not current or previous == current:
        return []
    return [
        Finding(
            "warning",
            "restart/release-change-cold",
            f"the last start on this host ran SGLang {previous}; this one starts {current}: its JIT caches "
            "start cold, so expect the cold start-up time",
            "",
        )
    ]
