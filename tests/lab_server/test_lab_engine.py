"""Speculative decoding through the lab tree's TritonAttnBackend: lossless when the verify width is
sized right, broken the way the real server broke when it is not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from k26ctl.lab.server.engine import SpecSettings

from .helpers import BACKEND_REL, TOKENIZER, prompt_ids, run_engine

pytestmark = pytest.mark.lab

BUDGETS = (1, 3, 7, 8, 16, 31)
WIDTH_CAPS = (1, 2, 6)


def bang_run(ids: list[int], length: int = 8) -> bool:
    return "!" * length in TOKENIZER.decode(ids)


@pytest.mark.parametrize("batch_size", [1, 4])
@pytest.mark.parametrize("budget", BUDGETS)
def test_lossless_with_correct_sizing(
    model: Any, drafter: Any, plain_outputs: list[list[int]], patched_root: Path, budget: int, batch_size: int
) -> None:
    """Patched tree (target width = budget + 1): DDTree greedy equals plain greedy token for token."""
    prompts = prompt_ids()
    for cap in WIDTH_CAPS:
        spec = SpecSettings("DDTREE", block_size=8, budget=budget, max_topk=cap)
        outputs: list[list[int]] = []
        for start in range(0, len(prompts), batch_size):
            got, accept = run_engine(
                model, drafter, spec, root=patched_root, prompts=prompts[start : start + batch_size]
            )
            outputs.extend(got)
            assert accept >= 1.0
        assert outputs == plain_outputs, f"budget {budget}, width cap {cap}, batch {batch_size}"


def test_dflash_chain_is_lossless_and_fast(model: Any, drafter: Any, plain_outputs: list[list[int]]) -> None:
    outputs, accept = run_engine(model, drafter, SpecSettings("DFLASH", block_size=8))
    assert outputs == plain_outputs
    assert accept > 3.0, accept


def test_plain_output_is_readable_english(plain_outputs: list[list[int]]) -> None:
    capital = TOKENIZER.decode(plain_outputs[0])
    assert capital.startswith(
        "<think>The user asks for the capital city of France. That is Paris.</think>The capital"
    )
    assert TOKENIZER.decode(plain_outputs[2]).startswith(" at the end of a long stone pier.")


@pytest.mark.parametrize("budget", [3, 8, 16])
def test_unpatched_budget_other_than_7_is_broken(
    model: Any, drafter: Any, plain_outputs: list[list[int]], budget: int
) -> None:
    spec = SpecSettings("DDTREE", block_size=8, budget=budget, max_topk=1)
    batched, _ = run_engine(model, drafter, spec)
    assert batched != plain_outputs
    single, _ = run_engine(model, drafter, spec, prompts=prompt_ids(1))
    assert single[0] != plain_outputs[0], (
        "broken even for one request (qo_indptr and mask from the block size)"
    )


@pytest.mark.parametrize("cap", WIDTH_CAPS)
def test_unpatched_budget_7_matches_plain(
    model: Any, drafter: Any, plain_outputs: list[list[int]], cap: int
) -> None:
    outputs, accept = run_engine(model, drafter, SpecSettings("DDTREE", block_size=8, budget=7, max_topk=cap))
    assert outputs == plain_outputs
    assert accept > 3.0


def test_nan_rows_collapse_into_bangs_and_accept_length_falls(
    model: Any, drafter: Any, patched_root: Path
) -> None:
    spec = SpecSettings("DDTREE", block_size=8, budget=16, max_topk=1)
    broken, broken_accept = run_engine(model, drafter, spec, unvisited="nan", max_new=120)
    fixed, fixed_accept = run_engine(model, drafter, spec, root=patched_root, unvisited="nan", max_new=120)
    assert sum(bang_run(ids) for ids in broken) >= 3, [TOKENIZER.decode(i) for i in broken]
    assert not any(bang_run(ids) for ids in fixed)
    assert broken_accept < 1.5 < 3.0 < fixed_accept, (broken_accept, fixed_accept)


def test_stale_rows_garble_without_bangs(model: Any, drafter: Any, plain_outputs: list[list[int]]) -> None:
    spec = SpecSettings("DDTREE", block_size=8, budget=16, max_topk=1)
    outputs, accept = run_engine(model, drafter, spec, unvisited="stale")
    assert outputs != plain_outputs
    assert not any(bang_run(ids) for ids in outputs)
    assert accept < 2.0


def test_mask_only_scope_needs_two_requests(model: Any, drafter: Any, plain_outputs: list[list[int]]) -> None:
    spec = SpecSettings("DDTREE", block_size=8, budget=16, max_topk=1)
    for i, ids in enumerate(prompt_ids()):
        single, _ = run_engine(model, drafter, spec, prompts=[ids], scope="mask-only")
        assert single[0] == plain_outputs[i], "mask-only must be invisible at batch size 1"
    batched, _ = run_engine(model, drafter, spec, scope="mask-only")
    assert batched[0] == plain_outputs[0], "request 0 reads its own mask"
    assert any(batched[i] != plain_outputs[i] for i in range(1, 4))


@pytest.mark.parametrize("budget", [3, 8, 16, 31])
def test_patched_tree_matches_plain_in_every_scope(
    model: Any, drafter: Any, plain_outputs: list[list[int]], patched_root: Path, budget: int
) -> None:
    spec = SpecSettings("DDTREE", block_size=8, budget=budget, max_topk=1)
    for scope in ("all", "mask-only"):
        outputs, _ = run_engine(model, drafter, spec, root=patched_root, scope=scope, unvisited="stale")
        assert outputs == plain_outputs, scope


def test_patch_sizes_only_the_target_backend(model: Any, drafter: Any, patched_root: Path) -> None:
    from k26ctl.lab.server.engine import Engine
    from k26ctl.lab.server.tree_loader import BUNDLED_TREE, import_tree

    assert "k26ctl patch triton-ddtree-verify-width" in (patched_root / BACKEND_REL).read_text()
    spec = SpecSettings("DDTREE", block_size=8, budget=16, max_topk=1)
    patched = Engine(model, import_tree(patched_root), spec, drafter)
    assert (patched.target_backend_width, patched.draft_backend_width) == (17, 8)
    bundled = Engine(model, import_tree(BUNDLED_TREE), spec, drafter)
    assert (bundled.target_backend_width, bundled.draft_backend_width) == (8, 8)
