"""DDTree tree building and the accept walk."""

from __future__ import annotations

import itertools

import pytest
import torch

from k26ctl.lab.server import ddtree

pytestmark = pytest.mark.lab


def _log_q(depth: int = 7, vocab: int = 12, seed: int = 0) -> torch.Tensor:
    return torch.randn(depth, vocab, generator=torch.Generator().manual_seed(seed)).log_softmax(-1)


def test_width_cap_formula() -> None:
    assert ddtree.depth_width(16, 7, 264, 6) == 3
    assert ddtree.depth_width(16, 7, 264, 1) == 1
    assert ddtree.depth_width(8, 7, 264, 6) == 2
    assert ddtree.depth_width(100, 7, 5, 6) == 5


@pytest.mark.parametrize("budget", [1, 3, 7])
def test_spine_mode_is_the_top1_chain(budget: int) -> None:
    log_q = _log_q()
    tree = ddtree.build_tree(log_q, budget, 6)
    assert tree.tokens == log_q.argmax(-1).tolist()[:budget]
    assert tree.parents == list(range(budget))


def test_width_1_chain_stops_at_depth_limit() -> None:
    tree = ddtree.build_tree(_log_q(), 16, 1)
    assert tree.num_nodes == 7 and tree.depths == list(range(1, 8))


@pytest.mark.parametrize("budget,cap", [(8, 2), (16, 6), (31, 6), (31, 2)])
def test_tree_is_prefix_closed_within_budget_and_cap(budget: int, cap: int) -> None:
    log_q = _log_q(seed=budget)
    tree = ddtree.build_tree(log_q, budget, cap)
    width = ddtree.depth_width(budget, 7, 12, cap)
    assert tree.num_nodes <= budget
    per_parent: dict[int, int] = {}
    for node in range(tree.num_nodes):
        parent = tree.parents[node]
        assert parent <= node, "parents come before children"
        assert tree.depths[node] == (1 if parent == 0 else tree.depths[parent - 1] + 1)
        per_parent[parent] = per_parent.get(parent, 0) + 1
    assert max(per_parent.values()) <= width
    # best first: the path scores of popped nodes never increase
    scores = []
    for node in range(tree.num_nodes):
        score, row = 0.0, node + 1
        while row:
            score += float(log_q[tree.depths[row - 1] - 1, tree.tokens[row - 1]])
            row = tree.parents[row - 1]
        scores.append(score)
    assert all(a >= b - 1e-6 for a, b in itertools.pairwise(scores))


def test_mask_rows_and_padding() -> None:
    tree = ddtree.build_tree(_log_q(), 8, 2)
    mask = ddtree.ancestors_mask(tree, 12)
    for node in range(tree.num_nodes):
        row = node + 1
        assert mask[row, row] and mask[row, 0] and mask[row, tree.parents[node]]
    assert not mask[tree.num_nodes + 1 :].any(), "padding rows see no tree column"
    tokens, depths = ddtree.verify_rows(tree, 99, 12)
    assert depths[: tree.num_nodes + 1] == [0, *tree.depths]
    assert (
        len(tokens) == 12 and tokens[0] == 99 and tokens[tree.num_nodes + 1 :] == [0] * (11 - tree.num_nodes)
    )
    flat = ddtree.flat_custom_mask(mask, 5).view(12, 17)
    assert flat[:, :5].all()
    # as SGLang's DDTree worker: padding rows are False in the prefix columns too
    real = tree.num_nodes + 1
    flat = ddtree.flat_custom_mask(mask, 5, rows=real).view(12, 17)
    assert flat[:real, :5].all() and not flat[real:].any()


def test_accept_walk_follows_target_choices() -> None:
    tree = ddtree.DraftTree(tokens=[10, 11, 20, 21], parents=[0, 0, 1, 3], depths=[1, 1, 2, 3])
    # the root picks 11 (row 2), whose pick 5 is not among its children: the bonus token
    accepted, bonus = ddtree.accept_walk(tree, [11, 0, 5, 0, 0])
    assert accepted == [2] and bonus == 5
    accepted, bonus = ddtree.accept_walk(tree, [10, 20, 0, 21, 7])
    assert accepted == [1, 3, 4] and bonus == 7
    assert ddtree.accept_walk(tree, [3, 0, 0, 0, 0]) == ([], 3)
