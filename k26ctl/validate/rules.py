"""The rule registry: small functions from a `Context` (profile, rendered launch, the argv parsed against
SGLang's own option table) to findings.

Rules read the parsed argv rather than profile fields where SGLang would, so a flag passed through
`sglang.extra_args` is judged the same as one k26ctl renders.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator

from k26ctl.algorithms import ALGORITHMS, DDTREE_BUDGET, DFLASH_BLOCK
from k26ctl.algorithms import algorithm as catalogued
from k26ctl.render import SECRET_FLAGS, is_secret_env_name
from k26ctl.validate.context import Context
from k26ctl.validate.findings import Finding
from k26ctl.validate.options import SGLANG_ENTRYPOINTS
from k26ctl.validate.registry import RULES, rule

FIX_PATCH = "triton-ddtree-verify-width"
# Releases whose Triton backend sizes the target-verify mask from the block size (the bug); from
# 0.5.17 it reads the width from spec_info (draft_token_num, then num_tokens_per_req from 0.5.21).
MASK_BUG_RELEASES = ("0.5.14", "0.5.15", "0.5.16")
KNOWN_SM120_BAD_BACKENDS = {
    "fa3": "FA3 kernels support SM80-SM90 only",
    "trtllm_mla": "trtllm_mla prefill fails on SM120 (SGLang issue #24633)",
}


@rule
def sglang_version_known(ctx: Context) -> Iterator[Finding]:
    table = ctx.table
    if table.note:
        yield Finding("info", "sglang/version-table", table.note, "")
    elif table.release is None:
        yield Finding(
            "info",
            "sglang/version-unset",
            f"sglang.version is not set: flags are checked against every release {table.sglang_version}",
            "deploy and validate --remote read it from the host; set sglang.version to check one release",
        )


@rule
def algorithm_known(ctx: Context) -> Iterator[Finding]:
    algo = ctx.algorithm
    row = catalogued(algo)
    if algo == "NONE" or algo in ctx.table.algorithms or (row is not None and row.alias_of is not None):
        return
    catalog = ctx.table.catalog
    elsewhere = catalog.releases_with_algorithm(algo) if catalog else []
    if algo in ctx.table.pr_algorithms:
        yield Finding(
            "info",
            "spec/algorithm-unreleased",
            f"{algo} is not in any SGLang release (PR #29907)",
            "the host must run the DDTree branch of SGLang",
        )
    elif elsewhere:
        yield Finding(
            "error",
            "spec/algorithm-version",
            f"speculative algorithm {algo} is in SGLang {elsewhere[0]} and later, not in"
            f" {ctx.table.sglang_version}: SGLang fails at start-up (Unknown speculative algorithm name)",
            "upgrade the host's SGLang, or pick an algorithm this release has",
        )
    else:
        aliases = [a.name for a in ALGORITHMS if a.alias_of is not None]
        known = [*ctx.table.algorithms, *aliases, *ctx.table.pr_algorithms]
        guess = difflib.get_close_matches(algo, known, n=1)
        yield Finding(
            "error",
            "spec/unknown-algorithm",
            f"unknown speculative algorithm {algo!r}: SGLang fails at start-up",
            f"did you mean {guess[0]}?" if guess else f"known: {', '.join(known)}",
        )


@rule
def served_model_name_rules(ctx: Context) -> Iterator[Finding]:
    """SGLang asserts the served model name holds no ':' (server_args.py; 0.5.23: validation_hook.py)."""
    served = ctx.args.get("served_model_name")
    name, key = (served, "sglang.served_model_name") if served else (ctx.args.get("model_path"), "")
    if name and ":" in name:
        where = key or "sglang.model_path (the served name defaults to it)"
        yield Finding(
            "error",
            "sglang/served-name-colon",
            f"served model name {name!r} contains ':': SGLang refuses to start",
            f"set a name without ':' ({where})",
        )


@rule
def entrypoint_runnable(ctx: Context) -> Iterator[Finding]:
    if ctx.profile.sglang.entrypoint == "sglang":
        yield Finding(
            "error",
            "sglang/entrypoint",
            "`python -m sglang` cannot start: SGLang has no sglang/__main__.py (its `sglang` command is the"
            " console script sglang.cli.main)",
            "set sglang.entrypoint: sglang.launch_server",
        )


@rule
def draft_model_required(ctx: Context) -> Iterator[Finding]:
    row = catalogued(ctx.algorithm)
    if row is not None and row.needs_draft_model and not ctx.args.get("speculative_draft_model_path"):
        yield Finding(
            "error",
            "spec/draft-model-required",
            f"{ctx.algorithm} needs a draft model: SGLang refuses to start without one",
            "set spec.draft_model_path",
        )


@rule
def spec_settings_without_algorithm(ctx: Context) -> Iterator[Finding]:
    spec = ctx.profile.spec
    if ctx.algorithm != "NONE":
        return
    stray = [
        name
        for name, value in (
            ("spec.draft_model_path", spec.draft_model_path),
            ("spec.block_size", spec.block_size),
            ("spec.num_steps", spec.num_steps),
            ("spec.eagle_topk", spec.eagle_topk),
        )
        if value is not None
    ]
    if stray:
        yield Finding(
            "warning",
            "spec/settings-ignored",
            f"{', '.join(stray)} set while spec.algorithm is NONE: nothing is rendered for them",
            "set spec.algorithm or remove the keys",
        )


@rule
def block_size_rules(ctx: Context) -> Iterator[Finding]:
    if not ctx.reads(DFLASH_BLOCK):
        if ctx.args.has("speculative_dflash_block_size"):
            yield Finding(
                "warning",
                "spec/block-size-ignored",
                "--speculative-dflash-block-size only applies to DFLASH (and DDTREE)",
                "use spec.block_size, rendered as --speculative-num-draft-tokens for other algorithms",
            )
        return
    dflash = ctx.args.integer("speculative_dflash_block_size")
    tokens = ctx.args.integer("speculative_num_draft_tokens")
    for dest, value in (("speculative_dflash_block_size", dflash), ("speculative_num_draft_tokens", tokens)):
        raw = ctx.args.get(dest)
        if raw is not None and (value is None or value <= 0):
            yield Finding(
                "error",
                "spec/block-size-invalid",
                f"block size must be a positive integer (got {raw!r})",
                "the Kimi K2.x DFlash drafter uses 8",
            )
    if dflash is not None and tokens is not None and dflash != tokens:
        yield Finding(
            "error",
            "spec/block-size-conflict",
            f"--speculative-dflash-block-size {dflash} and --speculative-num-draft-tokens {tokens} differ:"
            f" SGLang refuses to start",
            "set only spec.block_size",
        )
    if dflash is None and tokens is None:
        yield Finding(
            "warning",
            "spec/block-size-inferred",
            f"{ctx.algorithm} without a block size: SGLang reads it from the draft config, else uses 16",
            "set spec.block_size (8 for the Kimi K2.x DFlash drafter) so the rendered command says what runs",
        )


@rule
def dflash_startup_rules(ctx: Context) -> Iterator[Finding]:
    if not ctx.reads(DFLASH_BLOCK):
        return
    pp = ctx.args.integer("pp_size")
    if pp is not None and pp != 1:
        yield Finding(
            "error", "dflash/pp-size", f"{ctx.algorithm} needs pp_size 1 (got {pp})", "drop --pp-size"
        )
    if ctx.args.has("enable_dp_attention"):
        yield Finding(
            "error",
            "dflash/dp-attention",
            f"{ctx.algorithm} does not support DP attention",
            "drop --enable-dp-attention",
        )
    for dest, key in (
        ("speculative_num_steps", "spec.num_steps"),
        ("speculative_eagle_topk", "spec.eagle_topk"),
    ):
        value = ctx.args.integer(dest)
        if value is not None and value != 1:
            yield Finding(
                "warning",
                "dflash/forced-to-one",
                f"{key} = {value} is ignored: SGLang forces it to 1 for DFlash drafts",
                f"remove {key}",
            )
    window = ctx.args.integer("speculative_draft_window_size")
    block = ctx.block_size()
    if window is not None and block is not None and window < block:
        yield Finding(
            "error",
            "dflash/draft-window",
            f"--speculative-draft-window-size {window} is smaller than the block size {block}",
            "make the window at least the block size",
        )


@rule
def ddtree_rules(ctx: Context) -> Iterator[Finding]:
    ddtree = ctx.profile.spec.ddtree
    env = ctx.launch.env
    if not ctx.reads(DDTREE_BUDGET):
        stray = [f"spec.ddtree.{k}" for k, v in ddtree.model_dump().items() if v is not None]
        if ctx.args.has("speculative_ddtree_budget"):
            stray.append("--speculative-ddtree-budget")
        if stray:
            yield Finding(
                "warning",
                "ddtree/settings-ignored",
                f"{', '.join(stray)} set but the algorithm is {ctx.algorithm}: they have no effect",
                "set spec.algorithm: DDTREE or remove them",
            )
        return
    raw_budget = ctx.args.get("speculative_ddtree_budget")
    budget = ctx.args.integer("speculative_ddtree_budget")
    if raw_budget is not None and (budget is None or budget < 1):
        yield Finding(
            "error",
            "ddtree/budget-invalid",
            f"--speculative-ddtree-budget must be >= 1 (got {raw_budget!r})",
            "",
        )
    block = ctx.block_size()
    effective = budget if budget is not None else (block - 1 if block else None)
    if raw_budget is None:
        default = f"block size - 1 = {effective}" if effective is not None else "block size - 1"
        yield Finding(
            "info",
            "ddtree/budget-default",
            f"no tree budget: SGLang infers {default} (spine mode, a top-1 chain)",
            "set spec.ddtree.budget so the rendered command says what runs",
        )
    if effective is not None and block is not None and effective > block - 1:
        backends = {
            dest: ctx.args.get(dest) or ctx.args.get("attention_backend")
            for dest in ("prefill_attention_backend", "decode_attention_backend")
        }
        wrong = {d: b for d, b in backends.items() if b != "triton"}
        if wrong:
            shown = ", ".join(f"{d.split('_')[0]} {b or 'SGLang default'}" for d, b in wrong.items())
            yield Finding(
                "error",
                "ddtree/full-tree-backend",
                f"DDTree budget {effective} > block size - 1 ({block - 1}) is full-tree mode, which needs"
                f" triton attention for prefill and decode ({shown}): SGLang refuses to start",
                "set sglang.attention_backend: triton (and no other prefill/decode backend),"
                f" or a budget <= {block - 1}",
            )
    page = ctx.args.integer("page_size")
    if page is None and not ctx.args.has("page_size"):
        yield Finding(
            "warning",
            "ddtree/page-size-unset",
            "DDTREE requires page size 1; the profile leaves it to SGLang's default",
            "set sglang.page_size: 1",
        )
    elif page != 1:
        yield Finding(
            "error",
            "ddtree/page-size",
            f"DDTREE requires page size 1 (got {ctx.args.get('page_size')})",
            "set sglang.page_size: 1",
        )
    if not ctx.args.has("disable_overlap_schedule"):
        yield Finding(
            "warning",
            "ddtree/overlap-schedule",
            "DDTREE runs without the overlap scheduler (SGLang forces it off)",
            "set sglang.disable_overlap_schedule: true so the command shows what runs",
        )
    if ctx.args.has("speculative_use_rejection_sampling"):
        yield Finding(
            "error",
            "ddtree/rejection-sampling",
            "DDTREE rejects --speculative-use-rejection-sampling",
            "remove it from sglang.extra_args",
        )
    topk = env.get("SGLANG_DDTREE_MAX_TOPK")
    if topk is not None and (not topk.strip().lstrip("-").isdigit() or int(topk) < 1):
        yield Finding(
            "error",
            "ddtree/max-topk-invalid",
            f"SGLANG_DDTREE_MAX_TOPK must be an integer >= 1 (got {topk!r})",
            "set spec.ddtree.max_topk, e.g. 1 for a chain",
        )
    bonus = env.get("SGLANG_DDTREE_DEPTH_BONUS")
    if bonus is not None:
        try:
            float(bonus)
        except ValueError:
            yield Finding(
                "error",
                "ddtree/depth-bonus-invalid",
                f"SGLANG_DDTREE_DEPTH_BONUS must be a number (got {bonus!r})",
                "set spec.ddtree.depth_bonus, e.g. 0.2 (lower or negative values favour wider, shallower"
                " trees)",
            )


@rule
def known_bug_ddtree_mask_width(ctx: Context) -> Iterator[Finding]:
    """SGLang 0.5.14-0.5.16's Triton backend sizes the target-verify custom mask from the block size,
    while DDTree verifies budget+1 tokens: any budget with budget+1 != block size degenerates silently.
    Lifted where the host's tree already sizes it right (the patch check says "not needed")."""
    if ctx.algorithm != "DDTREE" or FIX_PATCH in ctx.patch_names():
        return
    backend = ctx.args.get("attention_backend")
    if backend is not None and backend != "triton":
        return
    block = ctx.block_size()
    budget = ctx.args.integer("speculative_ddtree_budget")
    if budget is None:  # SGLang's default, block size - 1: the widths agree
        return
    if block is not None and budget + 1 == block:
        return
    state = (ctx.host_patches or {}).get(FIX_PATCH)
    if state == "not-needed":
        yield Finding(
            "info",
            "known-bug/ddtree-mask-width-lifted",
            f"DDTree budget {budget}: the host's Triton backend already sizes verify rows as budget + 1"
            f" (patch check of {FIX_PATCH}: not needed), so the mask-width bug does not apply",
            "",
        )
        return
    release = ctx.table.release
    if release is not None and release not in MASK_BUG_RELEASES:
        yield Finding(
            "info",
            "known-bug/ddtree-mask-width-lifted",
            f"SGLang {release} reads the verify width from spec_info (fixed upstream in 0.5.17), so"
            f" budget {budget} is sized right if the DDTree port sets it; `k26ctl patch status` confirms",
            "",
        )
        return
    width = f"verify width {budget + 1}"
    sized = f"block size {block}" if block is not None else "the block size (not set, so inferred)"
    on = "triton attention" if backend else "triton attention (SGLang's default for MLA on SM120)"
    tree = (
        f"SGLang {release}"
        if release
        else "an SGLang 0.5.14-0.5.16 tree (or a DDTree branch without the fix)"
    )
    yield Finding(
        "warning",
        "known-bug/ddtree-mask-width",
        f"DDTree budget {budget} on {on}: {width}, but {tree} sizes its verify mask from {sized};"
        " output degenerates (e.g. 'The.r!!!!!!!!') while /health stays 200",
        f"add the '{FIX_PATCH}' patch (patches: [{FIX_PATCH}]), or use budget {block - 1 if block else 7}",
    )


@rule
def attention_backend_on_sm120(ctx: Context) -> Iterator[Finding]:
    for dest in ("attention_backend", "prefill_attention_backend", "decode_attention_backend"):
        backend = ctx.args.get(dest)
        if backend in KNOWN_SM120_BAD_BACKENDS:
            yield Finding(
                "warning",
                "attention/sm120",
                f"--{dest.replace('_', '-')} {backend}: {KNOWN_SM120_BAD_BACKENDS[backend]}",
                "on RTX PRO 6000 Blackwell (SM120) use triton for MLA models such as Kimi",
            )


@rule
def tp_size_sane(ctx: Context) -> Iterator[Finding]:
    tp = ctx.args.integer("tp_size")
    if tp is None:
        return
    nodes = ctx.args.integer("nnodes") or 1
    if tp & (tp - 1):
        yield Finding(
            "warning",
            "sglang/tp-size",
            f"tp_size {tp} is not a power of two: attention heads will not split evenly",
            "use 1, 2, 4 or 8",
        )
    if tp > 8 * nodes:
        yield Finding(
            "warning",
            "sglang/tp-size",
            f"tp_size {tp} needs more than 8 GPUs per node ({nodes} node(s))",
            "one host has 8 GPUs: use sglang.tp_size: 8",
        )


@rule
def port_rules(ctx: Context) -> Iterator[Finding]:
    port = ctx.args.integer("port")
    if port is None:
        return
    if port + 10000 > 65535 and "SGLANG_GRPC_PORT" not in ctx.launch.env:
        yield Finding(
            "error",
            "port/grpc-range",
            f"port {port}: SGLang derives its gRPC port as port + 10000 = {port + 10000} > 65535 and refuses"
            " to start",
            "use a port <= 55535 or set service.environment.SGLANG_GRPC_PORT",
        )
    used: dict[int, str] = {port: "--port"}
    for dest, values in ctx.args.values.items():
        if not dest.endswith("_port") or dest == "port":
            continue
        for value in values:
            if value.isdigit():
                other = int(value)
                if other in used:
                    yield Finding(
                        "error",
                        "port/conflict",
                        f"--{dest.replace('_', '-')} {other} collides with {used[other]}",
                        "give every listener its own port",
                    )
                used[other] = f"--{dest.replace('_', '-')}"
    ssh_port = ctx.profile.host.port or 22
    if port == ssh_port and not ctx.profile.host.lab:
        yield Finding(
            "error",
            "port/conflict",
            f"sglang.port {port} is the host's SSH port",
            "pick another port for SGLang",
        )
    user = ctx.profile.service.user
    if port < 1024 and user not in (None, "root", "0"):
        yield Finding(
            "warning",
            "port/privileged",
            f"port {port} is privileged but the service runs as {user}",
            "use a port >= 1024",
        )


@rule
def secret_rules(ctx: Context) -> Iterator[Finding]:
    for flag in sorted(SECRET_FLAGS):
        dest = flag[2:].replace("-", "_")
        if ctx.args.has(dest) and dest not in ctx.args.env_ref_dests:
            yield Finding(
                "warning",
                "secret/literal-api-key",
                f"{flag} is written literally in sglang.extra_args: the secret lands in the unit file",
                "use sglang.api_key_env: NAME and put NAME=... in service.environment_file",
            )
    name = ctx.profile.sglang.api_key_env
    svc = ctx.profile.service
    if name and name not in svc.environment and not svc.environment_file:
        yield Finding(
            "warning",
            "secret/api-key-env-unset",
            f"--api-key ${{{name}}} but neither service.environment nor service.environment_file"
            f" provides {name}: systemd expands it to an empty key and the server runs without auth",
            "set service.environment_file to a root-only file containing the variable",
        )
    for key, value in svc.environment.items():
        if is_secret_env_name(key) and value:
            yield Finding(
                "warning",
                "secret/literal-environment",
                f"service.environment.{key} looks like a secret and would be written into the unit file",
                "move it to the file named by service.environment_file",
            )


@rule
def environment_overrides(ctx: Context) -> Iterator[Finding]:
    owned = {
        "PATH": "service.path",
        "CUDA_HOME": "service.cuda_home",
        "SGLANG_DDTREE_MAX_TOPK": "spec.ddtree.max_topk",
        "SGLANG_DDTREE_DEPTH_BONUS": "spec.ddtree.depth_bonus",
    }
    for key in ctx.profile.service.environment:
        if key in owned:
            yield Finding(
                "warning",
                "env/overrides-profile-key",
                f"service.environment.{key} overrides what {owned[key]} renders",
                f"set {owned[key]} instead",
            )


@rule
def unit_settings(ctx: Context) -> Iterator[Finding]:
    svc = ctx.profile.service
    # Only a real SGLang loads a 590 GB checkpoint; a stand-in entrypoint (the lab) may start faster.
    if svc.timeout_start_sec < 1800 and ctx.profile.sglang.entrypoint in SGLANG_ENTRYPOINTS:
        yield Finding(
            "warning",
            "unit/timeout-start",
            f"service.timeout_start_sec {svc.timeout_start_sec} is under 30 minutes; loading Kimi K2.6 takes"
            " 7 minutes with the multithreaded loader and 25 without",
            "use 1800 or more",
        )
    if svc.restart != "no" and svc.start_limit_interval_sec == 0:
        yield Finding(
            "warning",
            "unit/restart-unlimited",
            "start_limit_interval_sec 0 turns off systemd's start limit: a crash at load restarts forever",
            "keep a start limit (e.g. 7200 s, burst 3)",
        )


@rule
def patches_known(ctx: Context) -> Iterator[Finding]:
    if not ctx.profile.patches:
        return
    catalog = known_patch_names()
    if catalog is None:
        yield Finding(
            "info",
            "patches/catalog-missing",
            "no patch catalog (templates/patches/*.yaml) to check patch names against",
            "",
        )
        return
    for name in ctx.profile.patches:
        if name not in catalog:
            guess = difflib.get_close_matches(name, sorted(catalog), n=1)
            yield Finding(
                "error",
                "patches/unknown",
                f"unknown patch {name!r}",
                f"did you mean {guess[0]!r}?"
                if guess
                else f"known patches: {', '.join(sorted(catalog)) or 'none'}",
            )


def known_patch_names() -> set[str] | None:
    """Names of the shipped patches (file stems and their `name:`), or None without a catalog."""
    import yaml

    from k26ctl.resources import templates_dir

    folder = templates_dir() / "patches"
    files = sorted(folder.glob("*.yaml")) + sorted(folder.glob("*.yml")) if folder.is_dir() else []
    if not files:
        return None
    names: set[str] = set()
    for path in files:
        names.add(path.stem)
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError):
            continue
        if isinstance(data, dict) and isinstance(data.get("name"), str):
            names.add(data["name"])
    return names


# Combinations of flags, each rule with its source and releases (validate/crossflag.py).
from k26ctl.validate.crossflag import cross_flag_findings  # noqa: E402

RULES.append(cross_flag_findings)

# Rules kept in their own modules register themselves on import (they import `rule` from registry.py).
from k26ctl.validate import lossless as _lossless  # noqa: E402, F401
from k26ctl.validate import tool_parser as _tool_parser  # noqa: E402, F401
from k26ctl.validate import warm_caches as _warm_caches  # noqa: E402, F401
