"""Validation: everything that can be known wrong about a profile before a 7-minute restart.

Each rule is a small function from a `Context` (profile, rendered launch, the argv parsed against
SGLang's own option table) to findings. Rules read the parsed argv rather than profile fields where
SGLang would, so a flag passed through `sglang.extra_args` is judged the same as one k26ctl renders.
"""

from __future__ import annotations

import difflib
import json
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from k26ctl.errors import ConfigError
from k26ctl.profile import Profile
from k26ctl.render import LaunchSpec, render_launch, render_unit, unit_name

if TYPE_CHECKING:
    from k26ctl.remote.base import Host

Level = Literal["error", "warning", "info"]

OPTION_TABLE = Path(__file__).resolve().parent / "data" / "sglang_options.json"
FIX_PATCH = "triton-ddtree-verify-width"
SGLANG_ENTRYPOINTS = ("sglang.launch_server", "sglang")
# Algorithms that take their block size from the DFlash drafter.
BLOCK_ALGORITHMS = ("DFLASH", "DDTREE")
DRAFT_REQUIRED = ("DFLASH", "DDTREE", "STANDALONE", "EAGLE3")
# Speculative algorithms SGLang gained after the release the option table was generated from.
LATER_ALGORITHMS = {"DSPARK": "0.5.16", "UNO": "0.5.20"}
# Profile keys that own a flag: passing the flag through extra_args as well is a conflict.
PROFILE_KEY_FOR_DEST = {
    "model_path": "sglang.model_path",
    "served_model_name": "sglang.served_model_name",
    "host": "sglang.host",
    "port": "sglang.port",
    "tp_size": "sglang.tp_size",
    "attention_backend": "sglang.attention_backend",
    "page_size": "sglang.page_size",
    "speculative_algorithm": "spec.algorithm",
    "speculative_draft_model_path": "spec.draft_model_path",
    "speculative_num_draft_tokens": "spec.block_size",
    "speculative_dflash_block_size": "spec.block_size",
    "speculative_ddtree_budget": "spec.ddtree.budget",
    "api_key": "sglang.api_key_env",
}
KNOWN_SM120_BAD_BACKENDS = {
    "fa3": "FA3 kernels support SM80-SM90 only",
    "trtllm_mla": "trtllm_mla prefill fails on SM120 (SGLang issue #24633)",
}


@dataclass(frozen=True)
class Finding:
    level: Level
    code: str
    message: str
    hint: str = ""

    def to_json(self) -> dict[str, str]:
        return asdict(self)


@dataclass
class ValidationReport:
    valid: bool
    findings: list[Finding]

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.level == "error"]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.level == "warning"]

    def codes(self) -> list[str]:
        return [f.code for f in self.findings]

    def to_json(self) -> dict[str, Any]:
        return {"valid": self.valid, "findings": [f.to_json() for f in self.findings]}


# ---- the SGLang option table --------------------------------------------------------------------


@dataclass(frozen=True)
class Option:
    flags: tuple[str, ...]
    dest: str
    takes_value: bool
    nargs: int | str | None
    choices: tuple[str, ...] | None
    deprecated: bool
    replacement: str | None
    hidden: bool
    source: str


@dataclass
class OptionTable:
    sglang_version: str
    options: tuple[Option, ...]
    algorithms: tuple[str, ...]
    pr_algorithms: tuple[str, ...]
    by_flag: dict[str, Option] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.by_flag = {flag: option for option in self.options for flag in option.flags}

    def lookup(self, flag: str) -> Option | None:
        return self.by_flag.get(flag)

    def prefix_matches(self, flag: str) -> list[Option]:
        """Options argparse would accept `flag` for as an abbreviation (SGLang leaves allow_abbrev on)."""
        seen: dict[str, Option] = {}
        for name, option in self.by_flag.items():
            if name.startswith(flag):
                seen[option.dest] = option
        return list(seen.values())

    def did_you_mean(self, flag: str) -> str | None:
        match = difflib.get_close_matches(flag, list(self.by_flag), n=1, cutoff=0.6)
        return match[0] if match else None


@cache
def load_option_table(path: Path = OPTION_TABLE) -> OptionTable:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"cannot read the SGLang option table {path}: {exc}",
            "regenerate it: scripts/gen_sglang_options.py",
        ) from None
    options = tuple(
        Option(
            flags=tuple(o["flags"]),
            dest=o["dest"],
            takes_value=bool(o["takes_value"]),
            nargs=o.get("nargs"),
            choices=tuple(o["choices"]) if o.get("choices") is not None else None,
            deprecated=bool(o.get("deprecated")),
            replacement=o.get("replacement"),
            hidden=bool(o.get("hidden")),
            source=o.get("source", ""),
        )
        for o in raw["options"]
    )
    algos = raw.get("speculative_algorithms", {})
    return OptionTable(
        sglang_version=raw["sglang_version"],
        options=options,
        algorithms=tuple(algos.get("release", [])),
        pr_algorithms=tuple(a for k, v in algos.items() if k != "release" for a in v),
    )


# ---- argv parsed against the table --------------------------------------------------------------


@dataclass
class ParsedArgs:
    """dest -> the values given, in order (flags without a value record "true")."""

    values: dict[str, list[str]] = field(default_factory=dict)
    env_ref_dests: set[str] = field(default_factory=set)

    def get(self, dest: str) -> str | None:
        got = self.values.get(dest)
        return got[-1] if got else None

    def has(self, dest: str) -> bool:
        return dest in self.values

    def integer(self, dest: str) -> int | None:
        value = self.get(dest)
        if value is None:
            return None
        try:
            return int(value)
        except ValueError:
            return None


def parse_flags(
    words: list[str], table: OptionTable, env_ref_positions: Iterable[int] = ()
) -> tuple[ParsedArgs, list[Finding]]:
    """Read SGLang flags from argv (after `python -m entrypoint`) the way its parser would."""
    refs = set(env_ref_positions)
    parsed = ParsedArgs()
    findings: list[Finding] = []
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if not word.startswith("--") or word == "--":
            findings.append(
                Finding(
                    "error",
                    "flags/unexpected-argument",
                    f"unexpected argument {word!r}: SGLang takes no positional arguments",
                    "check sglang.extra_args: every value must follow its --flag",
                )
            )
            continue
        flag, has_inline, inline = word.partition("=")
        option = table.lookup(flag)
        if option is None:
            option = _resolve_unknown(flag, table, findings)
            if option is None:
                # Skip what looks like the unknown flag's value so it is not reported again.
                if i < len(words) and not words[i].startswith("--") and not has_inline:
                    i += 1
                continue
        if option.deprecated:
            replacement = option.replacement or "see SGLang's --help"
            extra = " (or set sglang.cuda_graph: disabled)" if option.dest == "disable_cuda_graph" else ""
            findings.append(
                Finding(
                    "warning",
                    "flags/deprecated",
                    f"{flag} is deprecated in SGLang {table.sglang_version}",
                    f"use {replacement}{extra}",
                )
            )
        if not option.takes_value:
            if has_inline:
                findings.append(
                    Finding(
                        "error",
                        "flags/unexpected-value",
                        f"{flag} takes no value (got {word!r})",
                        f"write {flag}",
                    )
                )
            parsed.values.setdefault(option.dest, []).append("true")
            continue
        values: list[str] = []
        if has_inline:
            values = [inline]
        elif option.nargs in ("+", "*") or isinstance(option.nargs, int):
            limit = option.nargs if isinstance(option.nargs, int) else len(words)
            while i < len(words) and not words[i].startswith("--") and len(values) < limit:
                if i in refs:
                    parsed.env_ref_dests.add(option.dest)
                values.append(words[i])
                i += 1
        elif i < len(words) and (not words[i].startswith("--") or words[i] == "--"):
            if i in refs:
                parsed.env_ref_dests.add(option.dest)
            values = [words[i]]
            i += 1
        if not values and option.nargs not in ("*", "?"):
            findings.append(
                Finding("error", "flags/missing-value", f"{flag} needs a value", f"write {flag} VALUE")
            )
            continue
        if option.choices is not None:
            for value in values:
                if value not in option.choices:
                    guess = difflib.get_close_matches(value, list(option.choices), n=1, cutoff=0.5)
                    hint = (
                        f"did you mean {guess[0]!r}?"
                        if guess
                        else f"choices: {', '.join(option.choices[:20])}"
                    )
                    findings.append(
                        Finding(
                            "error", "flags/invalid-choice", f"{flag} {value!r} is not a valid choice", hint
                        )
                    )
        if option.dest in parsed.values:
            findings.append(
                Finding(
                    "error",
                    "flags/duplicate",
                    f"{flag} is given more than once (SGLang keeps only the last value)",
                    _duplicate_hint(option.dest),
                )
            )
        parsed.values.setdefault(option.dest, []).extend(values or [""])
    return parsed, findings


def _duplicate_hint(dest: str) -> str:
    key = PROFILE_KEY_FOR_DEST.get(dest)
    if key:
        return f"remove it from sglang.extra_args and set {key} instead"
    return "remove the extra copy from sglang.extra_args"


def _resolve_unknown(flag: str, table: OptionTable, findings: list[Finding]) -> Option | None:
    matches = table.prefix_matches(flag)
    if len(matches) == 1:
        canonical = matches[0].flags[0]
        findings.append(
            Finding(
                "warning",
                "flags/abbreviated",
                f"{flag} is not an SGLang flag; argparse accepts it only as an abbreviation of {canonical}",
                f"write {canonical}",
            )
        )
        return matches[0]
    guess = table.did_you_mean(flag)
    if len(matches) > 1:
        names = ", ".join(sorted(m.flags[0] for m in matches)[:5])
        findings.append(
            Finding("error", "flags/ambiguous", f"{flag} is ambiguous ({names})", "write the full flag")
        )
    else:
        findings.append(
            Finding(
                "error",
                "flags/unknown",
                f"unknown SGLang flag {flag} (not in SGLang {table.sglang_version} or DDTree PR #29907)",
                f"did you mean {guess}?"
                if guess
                else "see `python -m sglang.launch_server --help` on the host",
            )
        )
    return None


# ---- rules --------------------------------------------------------------------------------------


@dataclass
class Context:
    profile: Profile
    launch: LaunchSpec
    args: ParsedArgs
    table: OptionTable

    @property
    def algorithm(self) -> str:
        return (self.args.get("speculative_algorithm") or "NONE").upper()

    def block_size(self) -> int | None:
        for dest in ("speculative_dflash_block_size", "speculative_num_draft_tokens"):
            value = self.args.integer(dest)
            if value is not None:
                return value
        return None

    def patch_names(self) -> set[str]:
        return set(self.profile.patches)


Rule = Callable[[Context], Iterator[Finding]]
RULES: list[Rule] = []


def rule(fn: Rule) -> Rule:
    RULES.append(fn)
    return fn


@rule
def algorithm_known(ctx: Context) -> Iterator[Finding]:
    algo = ctx.algorithm
    if algo == "NONE":
        return
    if algo in LATER_ALGORITHMS:
        yield Finding(
            "warning",
            "spec/algorithm-version",
            f"speculative algorithm {algo} needs SGLang {LATER_ALGORITHMS[algo]} or newer"
            f" (the option table is from {ctx.table.sglang_version})",
            "make sure the host runs a release that has it",
        )
    elif algo in ctx.table.pr_algorithms:
        yield Finding(
            "info",
            "spec/algorithm-unreleased",
            f"{algo} is not in any SGLang release (PR #29907)",
            "the host must run the DDTree branch of SGLang",
        )
    elif algo not in ctx.table.algorithms and algo != "NEXTN":
        known = [*ctx.table.algorithms, "NEXTN", *ctx.table.pr_algorithms]
        guess = difflib.get_close_matches(algo, known, n=1)
        yield Finding(
            "error",
            "spec/unknown-algorithm",
            f"unknown speculative algorithm {algo!r}: SGLang fails at start-up",
            f"did you mean {guess[0]}?" if guess else f"known: {', '.join(known)}",
        )


@rule
def draft_model_required(ctx: Context) -> Iterator[Finding]:
    if ctx.algorithm in DRAFT_REQUIRED and not ctx.args.get("speculative_draft_model_path"):
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
    if ctx.algorithm not in BLOCK_ALGORITHMS:
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
    if ctx.algorithm not in BLOCK_ALGORITHMS:
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
    if ctx.algorithm != "DDTREE":
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
    if raw_budget is None:
        yield Finding(
            "error",
            "ddtree/budget-required",
            "DDTREE needs a tree budget",
            "set spec.ddtree.budget (7 gives a verify width of 8, the Kimi drafter's block size)",
        )
    elif budget is None or budget < 1:
        yield Finding(
            "error", "ddtree/budget-invalid", f"DDTree budget must be >= 1 (got {raw_budget!r})", ""
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
            if float(bonus) < 0:
                raise ValueError
        except ValueError:
            yield Finding(
                "error",
                "ddtree/depth-bonus-invalid",
                f"SGLANG_DDTREE_DEPTH_BONUS must be a number >= 0 (got {bonus!r})",
                "set spec.ddtree.depth_bonus, e.g. 0.2",
            )


@rule
def known_bug_ddtree_mask_width(ctx: Context) -> Iterator[Finding]:
    """SGLang's Triton backend sizes the target-verify custom mask from the block size, while DDTree
    verifies budget+1 tokens: any budget with budget+1 != block size degenerates silently."""
    if ctx.algorithm != "DDTREE" or FIX_PATCH in ctx.patch_names():
        return
    backend = ctx.args.get("attention_backend")
    if backend is not None and backend != "triton":
        return
    budget = ctx.args.integer("speculative_ddtree_budget")
    block = ctx.block_size()
    if budget is None or (block is not None and budget + 1 == block):
        return
    width = f"verify width {budget + 1}"
    sized = f"block size {block}" if block is not None else "the block size (not set, so inferred)"
    on = "triton attention" if backend else "triton attention (SGLang's default for MLA on SM120)"
    yield Finding(
        "warning",
        "known-bug/ddtree-mask-width",
        f"DDTree budget {budget} on {on}: {width} but the backend sizes its verify mask from {sized};"
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
    from k26ctl.render import SECRET_FLAGS, is_secret_env_name

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


# ---- systemd-analyze verify ---------------------------------------------------------------------


def missing_executable_line(name: str, executable: str) -> str:
    return f"{name}: Command {executable} is not executable: No such file or directory"


def interpret_verify(
    returncode: int, stderr: str, name: str, executable: str, *, tolerate_missing_executable: bool
) -> list[Finding]:
    """Turn `systemd-analyze verify` output into findings. The tool warns on misspelled keys without
    failing, so any stderr is an error; only the absent interpreter may be tolerated (it lives on the
    target host, not here)."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    findings: list[Finding] = []
    missing = missing_executable_line(name, executable)
    if tolerate_missing_executable and missing in lines:
        lines = [line for line in lines if line != missing]
        findings.append(
            Finding(
                "info",
                "unit/executable-on-host",
                f"{executable} does not exist here; systemd-analyze on the host checks it",
                "run `k26ctl validate --remote` for the full check",
            )
        )
    if lines or (returncode != 0 and not findings):
        shown = "; ".join(lines[:5]) or f"exit {returncode}"
        findings.append(
            Finding(
                "error",
                "unit/systemd-verify",
                f"systemd-analyze verify rejects the rendered unit: {shown}",
                "fix the profile value that produced this unit line",
            )
        )
    return findings


def verify_unit_locally(unit_text: str, name: str, executable: str) -> list[Finding]:
    tool = shutil.which("systemd-analyze")
    if tool is None:
        return [Finding("info", "unit/systemd-verify-skipped", "systemd-analyze is not installed here", "")]
    with tempfile.TemporaryDirectory(prefix="k26ctl-verify-") as tmp:
        path = Path(tmp) / name
        path.write_text(unit_text, encoding="utf-8")
        try:
            result = subprocess.run(
                [tool, "verify", "--man=no", str(path)],
                capture_output=True,
                text=True,
                timeout=60,
                cwd=tmp,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return [
                Finding("info", "unit/systemd-verify-skipped", f"systemd-analyze could not run: {exc}", "")
            ]
    return interpret_verify(
        result.returncode, result.stderr, name, executable, tolerate_missing_executable=True
    )


# ---- entry points -------------------------------------------------------------------------------


def _finish(findings: list[Finding], strict: bool) -> ValidationReport:
    if strict:
        findings = [
            Finding("error", f.code, f.message, f.hint) if f.level == "warning" else f for f in findings
        ]
    order = {"error": 0, "warning": 1, "info": 2}
    findings = sorted(findings, key=lambda f: order[f.level])
    return ValidationReport(valid=not any(f.level == "error" for f in findings), findings=findings)


def collect_findings(profile: Profile, *, systemd: bool = True) -> tuple[list[Finding], LaunchSpec | None]:
    """All findings of the local rules; the LaunchSpec is None when the profile cannot be rendered."""
    try:
        launch = render_launch(profile)
    except ConfigError as exc:
        return [Finding("error", "render/invalid", exc.message, exc.hint or "")], None
    table = load_option_table()
    parsed, findings = parse_flags(launch.argv[3:], table, [i - 3 for i in launch.env_refs])
    ctx = Context(profile=profile, launch=launch, args=parsed, table=table)
    for check in RULES:
        findings.extend(check(ctx))
    try:
        unit = render_unit(profile)
    except ConfigError as exc:
        findings.append(Finding("error", "render/invalid", exc.message, exc.hint or ""))
    else:
        if systemd:
            findings.extend(verify_unit_locally(unit, unit_name(profile), launch.argv[0]))
    return findings, launch


def validate_profile(profile: Profile, *, strict: bool = False, systemd: bool = True) -> ValidationReport:
    findings, _ = collect_findings(profile, systemd=systemd)
    return _finish(findings, strict)


def ensure_valid(profile: Profile, *, strict: bool = False) -> ValidationReport:
    """Validate, raising ConfigError (exit 78) naming the first error when the profile is not valid."""
    report = validate_profile(profile, strict=strict)
    if not report.valid:
        first = report.errors[0]
        more = f" (and {len(report.errors) - 1} more)" if len(report.errors) > 1 else ""
        raise ConfigError(
            f"{first.code}: {first.message}{more}", first.hint or "run `k26ctl validate` for all"
        )
    return report


def merge_findings(
    report: ValidationReport, extra: Iterable[Finding], *, strict: bool = False
) -> ValidationReport:
    """A report with more findings (e.g. from the host's own parser), re-judged."""
    return _finish([*report.findings, *extra], strict)


def validate_with_host(profile: Profile, *, strict: bool = False) -> ValidationReport:
    """The local checks, then the host's own; the host is not contacted while local errors remain
    (an info finding says so), since its parser would only repeat them."""
    report = validate_profile(profile, strict=strict)
    if not report.valid:
        skipped = Finding("info", "remote/skipped", "host checks skipped: fix the local errors first", "")
        return merge_findings(report, [skipped], strict=strict)
    from k26ctl.remote import connect

    with connect(profile) as host:
        return merge_findings(report, remote_findings(host, profile), strict=strict)


# ---- on the host --------------------------------------------------------------------------------


def remote_findings(host: Host, profile: Profile) -> list[Finding]:
    """The checks only the host can answer: its own SGLang parser on the rendered flags, and
    `systemd-analyze verify` of the unit there (including that the interpreter exists)."""
    launch = render_launch(profile)
    findings = list(_host_parser_findings(host, profile, launch))
    findings.extend(_host_verify_findings(host, profile))
    return findings


def _host_parser_findings(host: Host, profile: Profile, launch: LaunchSpec) -> Iterator[Finding]:
    from k26ctl.remote.sglang_parse import parse_on_host

    if profile.sglang.entrypoint not in SGLANG_ENTRYPOINTS:
        yield Finding(
            "info",
            "remote/parser-skipped",
            f"entrypoint {profile.sglang.entrypoint} is not SGLang's launcher: flags not parsed on the host",
            "",
        )
        return
    result = parse_on_host(
        host,
        profile.sglang.python,
        launch.argv,
        profile.service.environment,
        timeout=profile.host.command_timeout,
    )
    if not result.importable:
        yield Finding(
            "error",
            "remote/sglang-not-importable",
            f"{profile.sglang.python} on {host.name} cannot import sglang.srt.server_args: {result.error}",
            "check sglang.python and service.environment.PYTHONPATH",
        )
        return
    version = result.version or "unknown version"
    for flag in result.unknown_flags:
        yield Finding(
            "error",
            "remote/unknown-flag",
            f"the host's SGLang ({version}) does not accept {flag}",
            "remove it, or install a release (or the DDTree branch) that has it",
        )
    if result.unknown and not result.unknown_flags:
        yield Finding(
            "error",
            "remote/invalid-arguments",
            f"the host's SGLang ({version}) left stray arguments: {' '.join(result.unknown)}",
            "every value in sglang.extra_args must follow its --flag",
        )
    if result.error:
        yield Finding(
            "error",
            "remote/invalid-arguments",
            f"the host's SGLang ({version}) rejects the flags: {result.error}",
            "fix the profile value named in the message",
        )


def _host_verify_findings(host: Host, profile: Profile) -> Iterator[Finding]:
    name = unit_name(profile)
    probe = host.run(["systemd-analyze", "--version"])
    if not probe.ok:
        yield Finding(
            "info", "unit/systemd-verify-skipped", f"systemd-analyze does not run on {host.name}", ""
        )
        return
    made = host.run(["mktemp", "-d", "/tmp/k26ctl-verify.XXXXXX"])
    if not made.ok:
        yield Finding("info", "unit/systemd-verify-skipped", f"cannot make a temp dir on {host.name}", "")
        return
    folder = made.stdout.strip()
    try:
        # 0600: a unit may carry a literal secret from extra_args.
        host.write_file_atomic(
            f"{folder}/{name}", render_unit(profile).encode("utf-8"), mode=0o600, backup=False
        )
        result = host.run(["systemd-analyze", "verify", "--man=no", f"{folder}/{name}"], timeout=120)
    finally:
        host.run(["rm", "-rf", "--", folder])
    yield from interpret_verify(
        result.returncode, result.stderr, name, profile.sglang.python, tolerate_missing_executable=False
    )
