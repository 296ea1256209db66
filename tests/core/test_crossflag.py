"""Cross-flag rules: each static rule trips on one profile and stays quiet on its neighbour; the runtime
rules read SGLang's decode lines; the table names a source and releases for every rule."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from k26ctl.errors import ConfigError
from k26ctl.profile import Profile, load_profile
from k26ctl.validate import ValidationReport, validate_profile
from k26ctl.validate.crossflag import (
    CROSS_FLAG_RULES,
    accept_lengths,
    journal_accept_findings,
    mixed_scheduling,
)

ROOT = Path(__file__).resolve().parents[2]
PROFILES = ROOT / "profiles"
EAGLE3 = ["spec.algorithm=EAGLE3", "spec.draft_model_path=/models/Kimi-K2.6-eagle3", "spec.num_steps=3"]


def profile(name: str, *overrides: str) -> Profile:
    return load_profile(PROFILES / f"{name}.yaml", list(overrides)).profile


def codes(name: str, *overrides: str) -> list[str]:
    return report(name, *overrides).codes()


def report(name: str, *overrides: str) -> ValidationReport:
    return validate_profile(profile(name, *overrides), systemd=False)


def extra(*args: str) -> str:
    return "sglang.extra_args=[" + ", ".join(f"'{a}'" for a in args) + "]"


def test_mla_eagle3_without_draft_backend() -> None:
    on_mla_only = report("base", *EAGLE3, "sglang.attention_backend=trtllm_mla", "sglang.context_length=2048")
    found = [f for f in on_mla_only.findings if f.code == "crossflag/mla-eagle3-draft-backend"]
    assert found and found[0].level == "error" and "#23490" in found[0].message and not on_mla_only.valid
    # the default (triton) backend: a warning, since the drafter still inherits the target's choice
    assert "crossflag/mla-eagle3-draft-backend" in codes("base", *EAGLE3)
    fixed = codes("base", *EAGLE3, "spec.draft_attention_backend=triton", "sglang.context_length=2048")
    assert "crossflag/mla-eagle3-draft-backend" not in fixed
    # not an MLA target: no rule
    other = codes("base", *EAGLE3, "sglang.model_path=/models/Llama-3.1-8B")
    assert "crossflag/mla-eagle3-draft-backend" not in other


def test_eagle3_past_the_drafter_context() -> None:
    assert "crossflag/eagle3-long-context" in codes("base", *EAGLE3, "sglang.context_length=128000")
    assert "crossflag/eagle3-long-context" in codes("base", *EAGLE3)  # the model's own (long) context
    assert "crossflag/eagle3-long-context" not in codes("base", *EAGLE3, "sglang.context_length=2048")
    assert "crossflag/eagle3-long-context" not in codes("dflash", "sglang.context_length=128000")


def test_ddtree_needs_page_one_no_overlap_no_rejection_sampling() -> None:
    good = codes("ddtree-b7")
    assert not {"ddtree/page-size", "ddtree/overlap-schedule", "ddtree/rejection-sampling"} & set(good)
    bad = codes(
        "ddtree-b7",
        "sglang.page_size=16",
        "sglang.disable_overlap_schedule=false",
        extra("--speculative-use-rejection-sampling"),
    )
    assert {"ddtree/page-size", "ddtree/overlap-schedule", "ddtree/rejection-sampling"} <= set(bad)
    # the generic rejection-sampling rule leaves DDTREE to its own rule
    assert "crossflag/rejection-sampling-algorithm" not in bad


def test_sweep_arms_under_different_scheduling() -> None:
    ddtree_overlap_on = profile("ddtree-b7", "sglang.disable_overlap_schedule=false")
    control = profile("ddtree-b7", "sglang.disable_overlap_schedule=false", "spec.algorithm=NONE")
    mixed = mixed_scheduling([("default", ddtree_overlap_on), ("speculation off", control)])
    assert mixed is not None and "speculation off" in mixed.message
    assert "non-overlap: default" in mixed.message
    off = profile("ddtree-b7", "spec.algorithm=NONE")
    same = [("default", profile("ddtree-b7")), ("speculation off", off)]
    assert mixed_scheduling(same) is None


def test_sweep_refuses_arms_under_different_scheduling() -> None:
    from k26ctl.sweep.api import prepare
    from k26ctl.sweep.state import SweepSpec

    def spec(*sets: str) -> SweepSpec:
        budgets = {"key": "spec.ddtree.budget", "values": [3, 7]}
        return SweepSpec(str(PROFILES / "ddtree-b7.yaml"), [budgets], [1], {"concurrency": 1}, list(sets))

    with pytest.raises(ConfigError, match="crossflag/sweep-mixed-scheduling"):
        prepare(spec("sglang.disable_overlap_schedule=false"))
    prepare(spec())


def test_rejection_sampling_rules() -> None:
    flag = extra("--speculative-use-rejection-sampling")
    assert "crossflag/rejection-sampling-algorithm" in codes("dflash", flag)
    assert "crossflag/rejection-sampling-topk" in codes("base", *EAGLE3, "spec.eagle_topk=4", flag)
    quiet = codes("base", *EAGLE3, "spec.eagle_topk=1", "sglang.context_length=2048", flag)
    assert not [c for c in quiet if c.startswith("crossflag/rejection-sampling")]


def test_rejection_sampling_deterministic_only_on_0515() -> None:
    flags = extra("--speculative-use-rejection-sampling", "--enable-deterministic-inference")
    base = ("base", *EAGLE3, "spec.eagle_topk=1", flags)
    assert "crossflag/rejection-sampling-deterministic" in codes(*base, "sglang.version=0.5.15")
    assert "crossflag/rejection-sampling-deterministic" not in codes(*base, "sglang.version=0.5.23")


def test_eagle_tree_on_a_paged_mla_backend() -> None:
    tree = ("base", *EAGLE3, "spec.eagle_topk=4", "sglang.page_size=64")
    assert "crossflag/eagle-tree-paged-backend" in codes(*tree, "sglang.attention_backend=flashmla")
    assert "crossflag/eagle-tree-paged-backend" not in codes(*tree, "sglang.attention_backend=triton")


def test_ngram_paged_tree() -> None:
    ngram = ("base", "spec.algorithm=NGRAM", "sglang.page_size=16")
    assert "crossflag/ngram-paged-tree" in codes(*ngram)  # triton, breadth 10 by default
    assert "crossflag/ngram-paged-tree" not in codes(*ngram, "sglang.attention_backend=flashinfer")
    narrow = extra("--speculative-ngram-max-bfs-breadth", "1")
    assert "crossflag/ngram-paged-tree" not in codes(*ngram, narrow)


def test_dp_attention_with_ngram_or_standalone() -> None:
    dp = extra("--enable-dp-attention")
    assert "crossflag/draft-dp-attention" in codes("base", "spec.algorithm=NGRAM", dp)
    assert "crossflag/draft-dp-attention" not in codes("base", "spec.algorithm=NGRAM")


def test_eagle_chain_draft_tokens_overridden() -> None:
    chain = ("base", *EAGLE3, "spec.eagle_topk=1", "sglang.context_length=2048")
    assert "crossflag/eagle-chain-draft-tokens" in codes(*chain, "spec.block_size=8")
    assert "crossflag/eagle-chain-draft-tokens" not in codes(*chain, "spec.block_size=4")


def decode_line(accept: float) -> str:
    return (
        "[2026-12-05 08:00:00 TP0] Decode batch, #running-req: 1, #token: 512, token usage: 0.01,"
        f" accept len: {accept:.2f}, accept rate: 0.00, cuda graph: True, gen throughput (token/s): 41.20,"
        " #queue-req: 0"
    )


def test_journal_accept_len_one_on_every_line() -> None:
    lines = ["Load weight end. elapsed=3.1 s", *(decode_line(1.0) for _ in range(4))]
    assert accept_lengths(lines) == [1.0] * 4
    found = journal_accept_findings(lines, algorithm="EAGLE3")
    assert [f.code for f in found] == ["runtime/accept-len-one"] and "#27829" in found[0].message
    # one line that accepted something, too few lines, or a lookup drafter: nothing to say
    assert not journal_accept_findings([*lines, decode_line(2.4)], algorithm="EAGLE3")
    assert not journal_accept_findings(lines[:3], algorithm="EAGLE3")
    assert not journal_accept_findings(lines, algorithm="NGRAM")


def test_journal_accept_len_one_after_an_upgrade() -> None:
    lines = [decode_line(1.0) for _ in range(5)]
    found = journal_accept_findings(lines, algorithm="DFLASH", earlier_release_accept=("0.5.15", 3.4))
    assert [f.code for f in found] == ["runtime/accept-len-one-after-upgrade"]
    assert "3.40 on SGLang 0.5.15" in found[0].message and "#24795" in found[0].message


def test_every_rule_names_a_source_releases_and_an_existing_test() -> None:
    text = (Path(__file__)).read_text()
    for entry in CROSS_FLAG_RULES:
        assert entry.source and entry.releases, entry.code
        assert re.search(r"#\d+|\.py:\d+", entry.source), entry.code
        name = entry.test.split("::")[1]
        assert f"def {name}(" in text, entry.code
    unreleased = [e for e in CROSS_FLAG_RULES if "29907" in e.source]
    assert unreleased and all("unreleased" in e.releases for e in unreleased)


def test_rule_table_in_docs_lists_every_rule() -> None:
    doc = (ROOT / "docs" / "crossflag.md").read_text()
    for entry in CROSS_FLAG_RULES:
        assert f"`{entry.code}`" in doc, entry.code
