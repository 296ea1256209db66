"""The emulated Triton extend kernel, driven by the lab backend's metadata, against dense attention.

Mirrors the kernel-level findings for SGLang 0.5.15 (bs = 2, prefixes 20 and 33, verify width 17,
backend width 8): correct sizing is exact; the block-size sizing leaves rows past bs x 8 unwritten
and gets request 0's rows 1.. wrong; "mask only" keeps request 0 exact and breaks request 1.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from k26ctl.lab.server import ddtree
from k26ctl.lab.server.kv_pool import TokenToKVPool
from k26ctl.lab.server.tree_loader import BUNDLED_TREE, LabTree, import_tree

pytestmark = pytest.mark.lab

HEADS, HEAD_DIM = 2, 8
LAYER = SimpleNamespace(
    layer_id=0,
    tp_q_head_num=HEADS,
    tp_k_head_num=HEADS,
    tp_v_head_num=HEADS,
    qk_head_dim=HEAD_DIM,
    v_head_dim=HEAD_DIM,
    scaling=1 / math.sqrt(HEAD_DIM),
)


def _tree(width: int) -> ddtree.DraftTree:
    """A branching tree of width - 1 nodes: two chains under the root."""
    tree = ddtree.DraftTree()
    for node in range(width - 1):
        tree.tokens.append(node)
        tree.parents.append(0 if node < 2 else node - 1)
        tree.depths.append(1 if node < 2 else node)
    return tree


def _run(
    tree_mod: LabTree, prefixes: list[int], width: int, backend_width: int, scope: str = "all"
) -> tuple[torch.Tensor, torch.Tensor]:
    tree_mod.lab_memory.configure(unvisited="nan", scope=scope)
    gen = torch.Generator().manual_seed(7)
    bs = len(prefixes)
    pool = TokenToKVPool(512, 1, HEADS, HEAD_DIM)
    pool.k_buffer[0].copy_(torch.randn(512, HEADS, HEAD_DIM, generator=gen))
    pool.v_buffer[0].copy_(torch.randn(512, HEADS, HEAD_DIM, generator=gen))
    req_to_token = torch.zeros(bs, 128, dtype=torch.int64)
    next_slot = 0
    for r, p in enumerate(prefixes):
        req_to_token[r, :p] = torch.arange(next_slot, next_slot + p)
        next_slot += p
    args = SimpleNamespace(
        speculative_num_draft_tokens=backend_width,
        speculative_algorithm="DDTREE",
        speculative_ddtree_budget=width - 1,
    )
    runner = SimpleNamespace(
        server_args=args,
        is_draft_worker=False,
        device="cpu",
        req_to_token_pool=SimpleNamespace(size=bs, req_to_token=req_to_token),
        token_to_kv_pool=pool,
        model_config=SimpleNamespace(num_attention_heads=HEADS),
    )
    backend = tree_mod.backend.TritonAttnBackend(runner)
    tree = _tree(width)
    tree_mask = ddtree.ancestors_mask(tree, width)
    mask = torch.cat([ddtree.flat_custom_mask(tree_mask, p) for p in prefixes])
    rows = bs * width
    q = torch.randn(rows, HEADS * HEAD_DIM, generator=gen)
    k = torch.randn(rows, HEADS * HEAD_DIM, generator=gen)
    v = torch.randn(rows, HEADS * HEAD_DIM, generator=gen)
    fbi = tree_mod.forward_batch_info
    batch = fbi.ForwardBatch(
        forward_mode=fbi.ForwardMode.TARGET_VERIFY,
        batch_size=bs,
        input_ids=torch.zeros(rows, dtype=torch.int64),
        positions=torch.zeros(rows, dtype=torch.int64),
        req_pool_indices=torch.arange(bs),
        seq_lens=torch.tensor(prefixes),
        out_cache_loc=torch.arange(400, 400 + rows),
        spec_info=fbi.SpecVerifyInfo(custom_mask=mask, draft_token_num=width),
    )
    backend.init_forward_metadata(batch)
    out = backend.forward_extend(q, k, v, LAYER, batch).view(bs, width, HEADS, HEAD_DIM)

    expected = torch.empty_like(out)
    for r, p in enumerate(prefixes):
        qr = q.view(bs, width, HEADS, HEAD_DIM)[r]
        keys = torch.cat([pool.k_buffer[0][req_to_token[r, :p]], k.view(bs, width, HEADS, HEAD_DIM)[r]])
        vals = torch.cat([pool.v_buffer[0][req_to_token[r, :p]], v.view(bs, width, HEADS, HEAD_DIM)[r]])
        allowed = torch.cat([torch.ones(width, p, dtype=torch.bool), tree_mask], dim=1)
        scores = torch.einsum("ihd,jhd->hij", qr, keys) * LAYER.scaling
        scores = scores.masked_fill(~allowed, float("-inf"))
        expected[r] = torch.einsum("hij,jhd->ihd", scores.softmax(-1), vals)
    return out, expected


def _row_ok(out: torch.Tensor, expected: torch.Tensor, r: int, i: int) -> bool:
    return bool(torch.allclose(out[r, i], expected[r, i], atol=1e-5))


@pytest.fixture(scope="module")
def tree_mod() -> LabTree:
    return import_tree(BUNDLED_TREE)


def test_correct_sizing_is_exact(tree_mod: LabTree) -> None:
    out, expected = _run(tree_mod, [20, 33], width=17, backend_width=17)
    assert torch.allclose(out, expected, atol=1e-5)


def test_budget_7_with_block_8_is_exact(tree_mod: LabTree) -> None:
    out, expected = _run(tree_mod, [20, 33], width=8, backend_width=8)
    assert torch.allclose(out, expected, atol=1e-5)


def test_block_size_sizing_leaves_rows_unwritten_and_wrong(tree_mod: LabTree) -> None:
    out, expected = _run(tree_mod, [20, 33], width=17, backend_width=8)
    assert _row_ok(out, expected, 0, 0)
    assert not all(_row_ok(out, expected, 0, i) for i in range(1, 16))
    flat = out.reshape(2 * 17, HEADS, HEAD_DIM)
    assert torch.isnan(flat[16:]).all(), "rows past bs x N are never written"
    assert not torch.isnan(flat[:16]).any()


def test_mask_only_breaks_request_1_only(tree_mod: LabTree) -> None:
    out, expected = _run(tree_mod, [20, 33], width=17, backend_width=8, scope="mask-only")
    assert all(_row_ok(out, expected, 0, i) for i in range(17))
    assert not any(_row_ok(out, expected, 1, i) for i in range(1, 17))
    single, single_expected = _run(tree_mod, [33], width=17, backend_width=8, scope="mask-only")
    assert torch.allclose(single, single_expected, atol=1e-5)
