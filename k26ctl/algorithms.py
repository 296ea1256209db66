"""The speculative algorithms k26ctl knows: one row each, read by the profile model, render, validate
and smoke's accept-length rule.

A row says what kind of drafter the algorithm is, which server argument bounds its accept length,
which flags it reads, and the first release whose `SpeculativeAlgorithm` enum has it (the option table
in k26ctl/data says the same per release; tests/core/test_algorithms.py fails when the two disagree or
when a table names an algorithm missing here). Facts from SGLang 0.5.23's
`srt/speculative/spec_info.py` (the enum, `is_eagle`) and `srt/arg_groups/speculative_hook.py` (how
each resolves `speculative_num_draft_tokens`).

To support an algorithm a release's table names: add its row here. Render and validate then treat it
by its kind and flags; only a flag no row reads yet needs code in render.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# chain: a draft model proposes one token per step (EAGLE-style): accept length reaches steps + 1.
# block: a drafter proposes a whole block per pass: the accept length reaches the verify width.
# lookup: drafts from text the request repeats (no model): no expected range, accepting nothing is normal.
# none: speculative decoding off.
Kind = Literal["chain", "block", "lookup", "none"]

NUM_STEPS = "--speculative-num-steps"
EAGLE_TOPK = "--speculative-eagle-topk"
DRAFT_TOKENS = "--speculative-num-draft-tokens"
DRAFT_MODEL = "--speculative-draft-model-path"
DRAFT_BACKEND = "--speculative-draft-attention-backend"
DFLASH_BLOCK = "--speculative-dflash-block-size"
DSPARK_BLOCK = "--speculative-dspark-block-size"
DDTREE_BUDGET = "--speculative-ddtree-budget"

_CHAIN_FLAGS = (DRAFT_MODEL, NUM_STEPS, EAGLE_TOPK, DRAFT_TOKENS, DRAFT_BACKEND)


@dataclass(frozen=True)
class Algorithm:
    name: str
    kind: Kind
    # Where the longest accept length is read from the server's arguments, in order: "steps+1" is
    # speculative_num_steps + 1; other entries name a server argument; empty: no range is known.
    reach: tuple[str, ...]
    # The flag `spec.block_size` renders as (None: the algorithm takes no block size).
    block_flag: str | None
    reads: tuple[str, ...]  # the flags it reads; validate warns about others of these set without it
    since: str | None  # the first release whose enum has it; None: not in a release (see `source`)
    source: str = "release"  # "release", "alias" (SGLang maps the name to `alias_of`), or a branch's PR
    alias_of: str | None = None
    needs_draft_model: bool = False  # SGLang refuses to start without --speculative-draft-model-path

    @property
    def speculative(self) -> bool:
        return self.kind != "none"


ALGORITHMS: tuple[Algorithm, ...] = (
    Algorithm("NONE", "none", (), None, (), None, source="k26ctl: speculative decoding off"),
    Algorithm("EAGLE", "chain", ("steps+1",), DRAFT_TOKENS, _CHAIN_FLAGS, "0.5.14"),
    Algorithm("EAGLE3", "chain", ("steps+1",), DRAFT_TOKENS, _CHAIN_FLAGS, "0.5.14", needs_draft_model=True),
    # NEXTN is a reserved alias SGLang resolves to EAGLE (spec_registry.py _RESERVED_ALIASES).
    Algorithm(
        "NEXTN", "chain", ("steps+1",), DRAFT_TOKENS, _CHAIN_FLAGS, None, source="alias", alias_of="EAGLE"
    ),
    Algorithm(
        "STANDALONE", "chain", ("steps+1",), DRAFT_TOKENS, _CHAIN_FLAGS, "0.5.14", needs_draft_model=True
    ),
    # Frozen-KV MTP (a Gemma 4 assistant draft; SGLang promotes EAGLE/NEXTN to it) runs on the EAGLE
    # path (spec_info.py is_eagle), so its verify width resolves to steps + 1 like EAGLE's.
    Algorithm("FROZEN_KV_MTP", "chain", ("steps+1",), DRAFT_TOKENS, _CHAIN_FLAGS, "0.5.14"),
    # NGRAM's num_draft_tokens is a tree size (SGLang sets eagle_topk 10, num_steps 0), not a depth.
    Algorithm("NGRAM", "lookup", (), DRAFT_TOKENS, (DRAFT_TOKENS,), "0.5.14"),
    Algorithm(
        "DFLASH",
        "block",
        ("speculative_dflash_block_size", "speculative_num_draft_tokens"),
        DFLASH_BLOCK,
        (DRAFT_MODEL, DFLASH_BLOCK, DRAFT_TOKENS, DRAFT_BACKEND),
        "0.5.14",
        needs_draft_model=True,
    ),
    # DSpark verifies gamma + 1 tokens: SGLang resolves speculative_num_draft_tokens to that window.
    Algorithm(
        "DSPARK",
        "block",
        ("speculative_num_draft_tokens",),
        DRAFT_TOKENS,
        (DRAFT_MODEL, DSPARK_BLOCK, DRAFT_TOKENS, DRAFT_BACKEND),
        "0.5.16",
    ),
    # UNO drafts with the target model and a LoRA; its verify width may be a tree, so no depth is known.
    Algorithm("UNO", "block", (), DRAFT_TOKENS, (DRAFT_TOKENS, EAGLE_TOPK), "0.5.20"),
    Algorithm(
        "DDTREE",
        "block",
        ("speculative_dflash_block_size", "speculative_num_draft_tokens"),
        DFLASH_BLOCK,
        (DRAFT_MODEL, DFLASH_BLOCK, DRAFT_TOKENS, DRAFT_BACKEND, DDTREE_BUDGET),
        None,
        source="PR #29907",
        needs_draft_model=True,
    ),
)

BY_NAME: dict[str, Algorithm] = {a.name: a for a in ALGORITHMS}
NAMES: tuple[str, ...] = tuple(BY_NAME)


def algorithm(name: str | None) -> Algorithm | None:
    """The row of `name` (any case; None and "" are NONE); None where the catalogue lacks it."""
    return BY_NAME.get((name or "NONE").upper())


def reads(name: str | None, flag: str) -> bool:
    row = algorithm(name)
    return row is not None and flag in row.reads
