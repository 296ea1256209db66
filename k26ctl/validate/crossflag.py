"""Cross-flag rules: combinations of settings that are each valid alone and fail (or mislead) together.

Every rule names where its fact comes from (an SGLang issue or PR, or a release's source file and line)
and the releases it applies to, so a finding can be checked and retired when SGLang changes. Static rules
judge a profile (they run with the other validate rules, through `cross_flag_findings`); runtime rules
judge what a running server printed (`journal_accept_findings`: the decode lines' `accept len`).

`CROSS_FLAG_RULES` is the table README.md and docs/crossflag.md show; tests/core/test_crossflag.py
holds a profile that trips each static rule and one that does not.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from k26ctl.validate.findings import Finding, Level
from k26ctl.validate.releases import version_key

if TYPE_CHECKING:
    from k26ctl.profile import Profile
    from k26ctl.validate.context import Context

SGLANG = "https://github.com/sgl-project/sglang"
# Targets whose attention is multi-head latent attention (MLA): the Kimi K2.x and DeepSeek V2/V3/R1
# families. Matched against the model path, since that is all a profile says about the model.
MLA_MODEL = re.compile(r"kimi[-_]?k2|deepseek[-_]?(v2|v3|r1)", re.IGNORECASE)
# Attention backends that implement MLA only: an MHA drafter (an EAGLE3 head) cannot run on them.
MLA_ONLY_BACKENDS = ("flashmla", "trtllm_mla", "cutlass_mla", "flashinfer_mla", "tokenspeed_mla")
EAGLE_FAMILY = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE")
# The EAGLE3 drafters published for large targets are trained with a 2048-token context (#6783).
EAGLE3_DRAFT_CONTEXT = 2048
# A decode line of SGLang's scheduler (every --decode-log-interval decode steps on TP0).
ACCEPT_LINE = re.compile(r"Decode batch\b.*?accept len: (?P<value>\d+(?:\.\d+)?)")
NOTHING_ACCEPTED = 1.05  # as smoke/acceptance.py: fewer than one draft token in 20 verify passes
MIN_ACCEPT_LINES = 3  # decode lines needed before "every line" means something


@dataclass(frozen=True)
class CrossFlagRule:
    code: str
    summary: str
    source: str  # the issue, PR or release source line the fact comes from
    links: tuple[str, ...]
    releases: str  # which releases it applies to, in words (shown in the table)
    kind: Literal["static", "runtime"]
    test: str  # the test that trips it and the one that does not
    check: Callable[[Context], Iterator[Finding]] | None = None
    # release bounds for static rules, inclusive; None: no bound (an unreleased branch has neither)
    first: str | None = None
    last: str | None = None

    def applies_to(self, release: str | None) -> bool:
        """False only where the host's release is known and outside the bounds."""
        key = version_key(release) if release else None
        if key is None:
            return True
        first = version_key(self.first) if self.first else None
        last = version_key(self.last) if self.last else None
        return (first is None or key >= first) and (last is None or key <= last)


def _is_mla_target(ctx: Context) -> bool:
    return bool(MLA_MODEL.search(ctx.args.get("model_path") or ctx.profile.sglang.model_path))


def mla_eagle3_draft_backend(ctx: Context) -> Iterator[Finding]:
    if ctx.algorithm not in ("EAGLE3", "EAGLE") or not _is_mla_target(ctx):
        return
    if ctx.args.get("speculative_draft_attention_backend"):
        return
    backend = ctx.args.get("attention_backend")
    level: Level = "error" if backend in MLA_ONLY_BACKENDS else "warning"
    inherited = f"the target's --attention-backend {backend}" if backend else "the target's (MLA) backend"
    yield Finding(
        level,
        "crossflag/mla-eagle3-draft-backend",
        f"{ctx.algorithm} drafter on an MLA target ({ctx.profile.sglang.model_path}) without"
        f" --speculative-draft-attention-backend: the drafter inherits {inherited}, and an MHA"
        " draft head fails at start-up on an MLA backend (sgl-project/sglang#23490, #23563)",
        "set spec.draft_attention_backend (e.g. triton or fa3) so the drafter gets an MHA backend",
    )


def eagle3_long_context(ctx: Context) -> Iterator[Finding]:
    if ctx.algorithm != "EAGLE3":
        return
    context = ctx.args.integer("context_length")
    if context is not None and context <= EAGLE3_DRAFT_CONTEXT:
        return
    said = f"context length {context}" if context else "the model's own context length (no --context-length)"
    yield Finding(
        "warning",
        "crossflag/eagle3-long-context",
        f"EAGLE3 with {said}: past the drafter's {EAGLE3_DRAFT_CONTEXT}-token training context its"
        " drafts are mostly rejected and EAGLE3 serves slower than no speculation"
        " (sgl-project/sglang#6783)",
        "measure long prompts with and without speculation (k26ctl sweep), or cap sglang.context_length"
        f" at {EAGLE3_DRAFT_CONTEXT} where prompts stay short",
    )


def rejection_sampling_rules(ctx: Context) -> Iterator[Finding]:
    if not ctx.args.has("speculative_use_rejection_sampling") or ctx.algorithm == "DDTREE":
        return  # DDTREE has its own rule (ddtree/rejection-sampling)
    if ctx.algorithm not in ("EAGLE", "EAGLE3", "NEXTN"):
        yield Finding(
            "error",
            "crossflag/rejection-sampling-algorithm",
            f"--speculative-use-rejection-sampling works with EAGLE, EAGLE3 and NEXTN only, not"
            f" {ctx.algorithm}: SGLang refuses to start",
            "remove --speculative-use-rejection-sampling from sglang.extra_args",
        )
        return
    topk = ctx.args.integer("speculative_eagle_topk")
    if topk is not None and topk != 1:
        yield Finding(
            "error",
            "crossflag/rejection-sampling-topk",
            f"--speculative-use-rejection-sampling needs --speculative-eagle-topk 1 (got {topk}):"
            " SGLang refuses to start",
            "set spec.eagle_topk: 1",
        )


def rejection_sampling_deterministic(ctx: Context) -> Iterator[Finding]:
    if ctx.args.has("speculative_use_rejection_sampling") and ctx.args.has("enable_deterministic_inference"):
        yield Finding(
            "error",
            "crossflag/rejection-sampling-deterministic",
            "--speculative-use-rejection-sampling with --enable-deterministic-inference: SGLang 0.5.15"
            " refuses to start (its sampling kernel is not batch-invariant)",
            "drop one of them, or run SGLang 0.5.23, which allows the pair on CUDA",
        )


def eagle_topk_page_backend(ctx: Context) -> Iterator[Finding]:
    if ctx.algorithm not in EAGLE_FAMILY:
        return
    topk, page = ctx.args.integer("speculative_eagle_topk"), ctx.args.integer("page_size")
    backend = ctx.args.get("attention_backend")
    if topk and topk > 1 and page and page > 1 and backend and backend not in ("flashinfer", "fa3", "triton"):
        yield Finding(
            "error",
            "crossflag/eagle-tree-paged-backend",
            f"--speculative-eagle-topk {topk} with --page-size {page} needs the flashinfer, fa3 or triton"
            f" attention backend (got {backend}): SGLang refuses to start",
            "set sglang.page_size: 1, spec.eagle_topk: 1, or another attention backend",
        )


def ngram_paged_tree(ctx: Context) -> Iterator[Finding]:
    if ctx.algorithm != "NGRAM":
        return
    breadth = ctx.args.integer("speculative_ngram_max_bfs_breadth")
    breadth = 10 if breadth is None else breadth  # server_args.py default
    page, backend = ctx.args.integer("page_size"), ctx.args.get("attention_backend")
    if breadth > 1 and page and page > 1 and backend and backend != "flashinfer":
        yield Finding(
            "error",
            "crossflag/ngram-paged-tree",
            f"NGRAM drafts a tree {breadth} wide; with --page-size {page} only flashinfer attention"
            f" computes it correctly (got {backend}): SGLang refuses to start",
            "set sglang.page_size: 1, or --speculative-ngram-max-bfs-breadth 1",
        )


def draft_dp_attention(ctx: Context) -> Iterator[Finding]:
    if ctx.algorithm in ("NGRAM", "STANDALONE") and ctx.args.has("enable_dp_attention"):
        yield Finding(
            "error",
            "crossflag/draft-dp-attention",
            f"{ctx.algorithm} does not support DP attention: SGLang refuses to start",
            "drop --enable-dp-attention",
        )


def eagle_chain_draft_tokens(ctx: Context) -> Iterator[Finding]:
    if ctx.algorithm not in EAGLE_FAMILY:
        return
    topk, steps = ctx.args.integer("speculative_eagle_topk"), ctx.args.integer("speculative_num_steps")
    tokens = ctx.args.integer("speculative_num_draft_tokens")
    if topk == 1 and steps is not None and tokens is not None and tokens != steps + 1:
        yield Finding(
            "warning",
            "crossflag/eagle-chain-draft-tokens",
            f"--speculative-num-draft-tokens {tokens} with topk 1 and {steps} steps: SGLang sets it to"
            f" steps + 1 = {steps + 1}, so the rendered command does not say what runs",
            f"set spec.block_size: {steps + 1} (or leave it out)",
        )


def _src(version: str, path: str, lines: str) -> str:
    return f"SGLang {version} sglang/srt/{path}:{lines}"


CROSS_FLAG_RULES: tuple[CrossFlagRule, ...] = (
    CrossFlagRule(
        "crossflag/mla-eagle3-draft-backend",
        "an EAGLE3 (MHA) drafter on an MLA target (Kimi K2.x, DeepSeek V3) needs"
        " --speculative-draft-attention-backend; without it the drafter inherits the target's backend",
        "sgl-project/sglang#23490, #23563; "
        + _src("0.5.15", "speculative/draft_utils.py", "21-33")
        + " (the draft backend falls back to --attention-backend); 0.5.23 draft_utils.py:45-61",
        (f"{SGLANG}/issues/23490", f"{SGLANG}/pull/23563"),
        "0.5.15 and 0.5.23 (checked in both): the draft runner falls back to the target's backend",
        "static",
        "test_crossflag.py::test_mla_eagle3_without_draft_backend",
        mla_eagle3_draft_backend,
    ),
    CrossFlagRule(
        "crossflag/eagle3-long-context",
        "EAGLE3 serves slower than no speculation once prompts exceed the drafter's 2048-token context",
        "sgl-project/sglang#6783",
        (f"{SGLANG}/issues/6783",),
        "any release: it follows from the drafter's training context, not SGLang's code",
        "static",
        "test_crossflag.py::test_eagle3_past_the_drafter_context",
        eagle3_long_context,
    ),
    CrossFlagRule(
        "ddtree/page-size, ddtree/overlap-schedule, ddtree/rejection-sampling",
        "DDTREE needs page size 1, forces the overlap scheduler off and refuses rejection sampling",
        "PR #29907 at 93e9850e, arg_groups/speculative_hook.py::_handle_ddtree (rules.py:ddtree_rules)",
        (f"{SGLANG}/pull/29907",),
        "unreleased: the DDTree branch (PR #29907) only",
        "static",
        "test_crossflag.py::test_ddtree_needs_page_one_no_overlap_no_rejection_sampling",
    ),
    CrossFlagRule(
        "crossflag/sweep-mixed-scheduling",
        "a sweep whose arms run under different scheduling (DDTREE forces overlap off, other arms keep it)"
        " compares the scheduler, not the drafters",
        "PR #29907 review (the same non-overlap baseline); _handle_ddtree forces disable_overlap_schedule",
        (f"{SGLANG}/pull/29907",),
        "unreleased: the DDTree branch (PR #29907) only",
        "static",
        "test_crossflag.py::test_sweep_arms_under_different_scheduling",
    ),
    CrossFlagRule(
        "crossflag/rejection-sampling-algorithm",
        "--speculative-use-rejection-sampling with an algorithm other than EAGLE, EAGLE3, NEXTN",
        _src("0.5.15", "arg_groups/speculative_hook.py", "401-405")
        + "; 0.5.23 arg_groups/speculative_hook.py:1215-1219",
        (),
        "0.5.15-0.5.23 (checked in both)",
        "static",
        "test_crossflag.py::test_rejection_sampling_rules",
        rejection_sampling_rules,
        first="0.5.15",
    ),
    CrossFlagRule(
        "crossflag/rejection-sampling-topk",
        "--speculative-use-rejection-sampling needs --speculative-eagle-topk 1",
        _src("0.5.15", "arg_groups/speculative_hook.py", "407-410")
        + "; 0.5.23 arg_groups/speculative_hook.py:1221-1224",
        (),
        "0.5.15-0.5.23 (checked in both)",
        "static",
        "test_crossflag.py::test_rejection_sampling_rules",
        first="0.5.15",
    ),
    CrossFlagRule(
        "crossflag/rejection-sampling-deterministic",
        "--speculative-use-rejection-sampling with --enable-deterministic-inference",
        _src("0.5.15", "arg_groups/speculative_hook.py", "421-426")
        + "; 0.5.23 allows it on CUDA (speculative_hook.py:1225 refuses it off CUDA only)",
        (),
        "0.5.15 (not 0.5.23; releases between were not checked)",
        "static",
        "test_crossflag.py::test_rejection_sampling_deterministic_only_on_0515",
        rejection_sampling_deterministic,
        first="0.5.15",
        last="0.5.15",
    ),
    CrossFlagRule(
        "crossflag/eagle-tree-paged-backend",
        "EAGLE topk > 1 with page size > 1 needs flashinfer, fa3 or triton attention",
        _src("0.5.15", "arg_groups/speculative_hook.py", "452-463")
        + "; 0.5.23 arg_groups/speculative_hook.py:1271-1282",
        (),
        "0.5.15-0.5.23 (checked in both)",
        "static",
        "test_crossflag.py::test_eagle_tree_on_a_paged_mla_backend",
        eagle_topk_page_backend,
        first="0.5.15",
    ),
    CrossFlagRule(
        "crossflag/ngram-paged-tree",
        "NGRAM (a tree --speculative-ngram-max-bfs-breadth wide, 10 by default) with page size > 1"
        " needs flashinfer",
        _src("0.5.15", "arg_groups/speculative_hook.py", "516-527")
        + "; 0.5.23 arg_groups/speculative_hook.py:1356-1367",
        (),
        "0.5.15-0.5.23 (checked in both)",
        "static",
        "test_crossflag.py::test_ngram_paged_tree",
        ngram_paged_tree,
        first="0.5.15",
    ),
    CrossFlagRule(
        "crossflag/draft-dp-attention",
        "NGRAM and STANDALONE refuse --enable-dp-attention",
        _src("0.5.15", "arg_groups/speculative_hook.py", "320-327, 528-531")
        + "; 0.5.23 arg_groups/speculative_hook.py:1078-1084, 1368-1371",
        (),
        "0.5.15-0.5.23 (checked in both)",
        "static",
        "test_crossflag.py::test_dp_attention_with_ngram_or_standalone",
        draft_dp_attention,
        first="0.5.15",
    ),
    CrossFlagRule(
        "crossflag/eagle-chain-draft-tokens",
        "EAGLE topk 1: SGLang overrides --speculative-num-draft-tokens with steps + 1",
        _src("0.5.15", "arg_groups/speculative_hook.py", "440-447")
        + "; 0.5.23 arg_groups/speculative_hook.py:1255-1262",
        (),
        "0.5.15-0.5.23 (checked in both)",
        "static",
        "test_crossflag.py::test_eagle_chain_draft_tokens_overridden",
        eagle_chain_draft_tokens,
        first="0.5.15",
    ),
    CrossFlagRule(
        "runtime/accept-len-one",
        "accept len 1.00 on every decode line: the drafter proposes nothing that is accepted",
        "sgl-project/sglang#27829",
        (f"{SGLANG}/issues/27829",),
        "any release; read from the journal (doctor) and from smoke/watch's measured accept length",
        "runtime",
        "test_crossflag.py::test_journal_accept_len_one_on_every_line",
    ),
    CrossFlagRule(
        "runtime/accept-len-one-after-upgrade",
        "accept length stuck at 1 after an SGLang upgrade, where the same configuration accepted before",
        "sgl-project/sglang#24795",
        (f"{SGLANG}/issues/24795",),
        "any upgrade; compared against the accept-length baseline of the same configuration on an"
        " earlier release (deploy/accept_baseline.py)",
        "runtime",
        "test_crossflag.py::test_journal_accept_len_one_after_an_upgrade",
    ),
)


def scheduling_of(profile: Profile) -> str:
    """How a profile's server schedules: DDTREE forces the overlap scheduler off (PR #29907)."""
    algorithm = profile.spec.algorithm.value
    return "non-overlap" if algorithm == "DDTREE" or profile.sglang.disable_overlap_schedule else "overlap"


def mixed_scheduling(arms: Sequence[tuple[str, Profile]]) -> Finding | None:
    """One finding when a sweep's arms (label, profile) would run under different schedulers."""
    by_mode: dict[str, list[str]] = {}
    for label, profile in arms:
        by_mode.setdefault(scheduling_of(profile), []).append(label)
    if len(by_mode) < 2:
        return None
    shown = "; ".join(
        f"{mode}: {', '.join(dict.fromkeys(labels))}" for mode, labels in sorted(by_mode.items())
    )
    return Finding(
        "error",
        "crossflag/sweep-mixed-scheduling",
        f"the sweep's arms run under different schedulers ({shown}): DDTREE forces the overlap scheduler"
        " off, so the comparison would measure the scheduler, not the drafters (PR #29907)",
        "set sglang.disable_overlap_schedule: true so every arm runs without the overlap scheduler",
    )


def cross_flag_findings(ctx: Context) -> Iterator[Finding]:
    """Every static cross-flag rule that applies to the host's release (every release when unknown)."""
    release = ctx.table.release
    for entry in CROSS_FLAG_RULES:
        if entry.check is not None and entry.applies_to(release):
            yield from entry.check(ctx)


def accept_lengths(lines: Iterable[str]) -> list[float]:
    """The `accept len` of every SGLang decode line among `lines` (journal messages)."""
    values = []
    for line in lines:
        match = ACCEPT_LINE.search(line)
        if match:
            values.append(float(match["value"]))
    return values


def journal_accept_findings(
    lines: Iterable[str], *, algorithm: str, earlier_release_accept: tuple[str, float] | None = None
) -> list[Finding]:
    """Runtime rules over one load's decode lines. `earlier_release_accept` is (release, accept length)
    the same configuration reached on an earlier release (an accept-length baseline), if any."""
    if not algorithm or algorithm.upper() in ("NONE", "NGRAM"):
        return []  # NGRAM accepts what the text repeats: 1.0 on fresh text is expected
    values = accept_lengths(lines)
    if len(values) < MIN_ACCEPT_LINES or max(values) > NOTHING_ACCEPTED:
        return []
    if earlier_release_accept is not None and earlier_release_accept[1] > NOTHING_ACCEPTED:
        release, before = earlier_release_accept
        return [
            Finding(
                "error",
                "runtime/accept-len-one-after-upgrade",
                f"accept len at most {max(values):.2f} on all {len(values)} decode lines, where the same"
                f" configuration accepted {before:.2f} on SGLang {release}: stuck at 1 after the upgrade"
                " (sgl-project/sglang#24795)",
                "compare the drafter's loading lines with the earlier release; roll back with"
                " `k26ctl rollback` if it must serve now",
            )
        ]
    return [
        Finding(
            "error",
            "runtime/accept-len-one",
            f"accept len at most {max(values):.2f} on all {len(values)} decode lines of a {algorithm.upper()}"
            " server: the drafter does nothing, speculation only costs time (sgl-project/sglang#27829)",
            "check the draft model path and that it matches the target;"
            " `k26ctl smoke` measures it per request",
        )
    ]
