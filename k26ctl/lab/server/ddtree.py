"""DDTree: build a draft tree from per-depth distributions, lay it out for verify, walk the accept path.

Pure functions over small Python structures; the engine turns them into tensors.
"""

from __future__ import annotations

import heapq
import os
from dataclasses import dataclass, field

import torch

DEFAULT_MAX_TOPK = 6  # SGLang's DDTree code documents 6 as the default width cap


@dataclass
class DraftTree:
    """Nodes in pop order (prefix-closed, parents before children). Index 0 is the root."""

    tokens: list[int] = field(default_factory=list)  # node tokens, root excluded
    parents: list[int] = field(default_factory=list)  # parent row (0 = root) per node
    depths: list[int] = field(default_factory=list)  # 1-based depth per node

    @property
    def num_nodes(self) -> int:
        return len(self.tokens)


def max_topk_from_env() -> int:
    raw = os.environ.get("SGLANG_DDTREE_MAX_TOPK")
    return int(raw) if raw else DEFAULT_MAX_TOPK


def depth_width(budget: int, depth_limit: int, vocab_size: int, max_topk: int) -> int:
    """Per-depth width cap: min(max(B // L + 1, 2), vocab, SGLANG_DDTREE_MAX_TOPK)."""
    return min(max(budget // depth_limit + 1, 2), vocab_size, max_topk)


def build_tree(log_q: torch.Tensor, budget: int, max_topk: int) -> DraftTree:
    """Best-first tree over path scores sum_d log q_d(rank_d), at most `budget` nodes.

    With budget <= L (spine mode) the tree is the top-1 chain of `budget` nodes.
    """
    depth_limit, vocab_size = log_q.shape
    tree = DraftTree()
    if budget <= depth_limit:
        top = log_q.argmax(dim=-1).tolist()
        for d in range(budget):
            tree.tokens.append(int(top[d]))
            tree.parents.append(d)  # the previous chain node (row d), the root for d = 0
            tree.depths.append(d + 1)
        return tree

    width = depth_width(budget, depth_limit, vocab_size, max_topk)
    scores, ranked = torch.topk(log_q, k=width, dim=-1)
    scores_l: list[list[float]] = scores.tolist()
    ranked_l: list[list[int]] = ranked.tolist()
    # entries: (-path score, tie-break counter, depth, rank, parent row, parent path score)
    heap: list[tuple[float, int, int, int, int, float]] = [(-scores_l[0][0], 0, 1, 0, 0, 0.0)]
    counter = 1
    while heap and tree.num_nodes < budget:
        neg_score, _, depth, rank, parent, parent_score = heapq.heappop(heap)
        tree.tokens.append(ranked_l[depth - 1][rank])
        tree.parents.append(parent)
        tree.depths.append(depth)
        row = tree.num_nodes  # rows are 1-based for nodes; row 0 is the root
        if rank + 1 < width:
            sibling = parent_score + scores_l[depth - 1][rank + 1]
            heapq.heappush(heap, (-sibling, counter, depth, rank + 1, parent, parent_score))
            counter += 1
        if depth < depth_limit:
            child = -neg_score + scores_l[depth][0]
            heapq.heappush(heap, (-child, counter, depth + 1, 0, row, -neg_score))
            counter += 1
    return tree


def ancestors_mask(tree: DraftTree, width: int) -> torch.Tensor:
    """[width, width] bool: row i sees its ancestors and itself; padding rows see no tree column."""
    mask = torch.zeros(width, width, dtype=torch.bool)
    mask[0, 0] = True
    for node in range(tree.num_nodes):
        row = node + 1
        parent = tree.parents[node]
        mask[row] = mask[parent]
        mask[row, row] = True
    return mask


def verify_rows(
    tree: DraftTree, root_token: int, width: int, pad_token: int = 0
) -> tuple[list[int], list[int]]:
    """Token ids and depth offsets of the `width` verify rows (root, nodes, padding)."""
    tokens = [root_token, *tree.tokens]
    depths = [0, *tree.depths]
    pad = width - len(tokens)
    if pad < 0:
        raise ValueError(f"tree of {len(tokens)} rows does not fit width {width}")
    return tokens + [pad_token] * pad, depths + [0] * pad


def flat_custom_mask(tree_mask: torch.Tensor, prefix_len: int, rows: int | None = None) -> torch.Tensor:
    """One request's block of the flat custom mask: width x (prefix + width). The first `rows` rows
    (root and tree nodes; all of them by default) see the whole prefix; padding rows see nothing, not
    even the prefix, as SGLang's DDTree worker leaves them."""
    width = tree_mask.shape[0]
    block = torch.zeros(width, prefix_len + width, dtype=torch.bool)
    block[: width if rows is None else rows, :prefix_len] = True
    block[:, prefix_len:] = tree_mask
    return block.reshape(-1)


def children_rows(tree: DraftTree) -> dict[int, list[tuple[int, int]]]:
    """Per verify row, its children as (token, row) in tree order (the root is row 0)."""
    children: dict[int, list[tuple[int, int]]] = {}
    for node in range(tree.num_nodes):
        children.setdefault(tree.parents[node], []).append((tree.tokens[node], node + 1))
    return children


def accept_walk(tree: DraftTree, target_choice: list[int]) -> tuple[list[int], int]:
    """Follow the target's greedy choices down the tree.

    `target_choice[row]` is the target's argmax at verify row `row`. Returns the accepted node rows
    (in path order) and the bonus token (the target's choice at the last accepted row).
    """
    children: dict[int, dict[int, int]] = {}
    for node in range(tree.num_nodes):
        children.setdefault(tree.parents[node], {})[tree.tokens[node]] = node + 1
    accepted: list[int] = []
    row = 0
    while True:
        nxt = children.get(row, {}).get(target_choice[row])
        if nxt is None:
            return accepted, target_choice[row]
        accepted.append(nxt)
        row = nxt
