"""Torch emulation of SGLang's Triton extend-attention kernel (`_fwd_kernel`).

It reproduces how the kernel addresses memory, not just what attention should compute:
- the launch grid is (requests from qo_indptr, heads, cdiv(max_len_extend, BLOCK_M)); a program
  handles rows [m * BLOCK_M, (m + 1) * BLOCK_M) of its request, limited to that request's
  qo_indptr length, so rows past the grid are never written;
- query/key/value rows of request r start at flat row qo_indptr[r], whatever the caller laid out;
- the prefix (kv_indptr/kv_indices into the KV pool) is never masked when the prefix custom mask
  is skipped;
- element (row i, key column j) of request r's custom mask is read at
  mask_indptr[r] + i * (prefix_r + extend_r) + j, extend columns starting at j = prefix_r;
- a key tile whose mask is entirely False is skipped, other masked columns still go through the
  P @ V product with weight 0 (so NaN values there poison the row, as on the GPU).
Block sizes follow the kernel's choice for SM120 with head_dim <= 128 (BLOCK_M 64, BLOCK_N 128).
"""

from __future__ import annotations

import math

import torch

from sglang.srt import lab_memory

BLOCK_M = 64
BLOCK_N = 128


def _load_rows(t: torch.Tensor, first: int, count: int) -> torch.Tensor:
    inside = max(0, min(count, t.shape[0] - first))
    parts = [t[first : first + inside]]
    if inside < count:
        parts.append(lab_memory.beyond_end(t, first + inside, count - inside))
    return torch.cat(parts) if len(parts) > 1 else parts[0]


def _store_rows(t: torch.Tensor, first: int, rows: torch.Tensor) -> None:
    inside = max(0, min(rows.shape[0], t.shape[0] - first))
    t[first : first + inside] = rows[:inside]  # stores past the end land outside this buffer


def _load_mask(mask: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    in_range = index < mask.numel()
    values = mask[index.clamp(max=mask.numel() - 1)]
    # bytes past the buffer's end are whatever follows it: read them as non-zero
    return torch.where(in_range, values, torch.ones_like(values))


def _attend(
    q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, allowed: torch.Tensor, sm_scale: float
) -> torch.Tensor:
    # q [rows, H, D], keys/values [cols, H, D], allowed [rows, cols]
    scores = torch.einsum("rhd,chd->hrc", q, keys) * sm_scale
    scores = torch.where(allowed.unsqueeze(0), scores, torch.full_like(scores, float("-inf")))
    row_max = scores.amax(dim=-1, keepdim=True)
    row_max = torch.where(row_max == float("-inf"), torch.full_like(row_max, -1e20), row_max)
    p = torch.exp(scores - row_max)
    deno = p.sum(dim=-1, keepdim=True)
    acc = torch.einsum("hrc,chd->hrd", p, values)
    return (acc / deno).permute(1, 0, 2)


def extend_attention_fwd(
    q_extend: torch.Tensor,
    k_extend: torch.Tensor,
    v_extend: torch.Tensor,
    o_extend: torch.Tensor,
    k_buffer: torch.Tensor,
    v_buffer: torch.Tensor,
    qo_indptr: torch.Tensor,
    kv_indptr: torch.Tensor,
    kv_indices: torch.Tensor,
    custom_mask: torch.Tensor | None,
    is_causal: bool,
    mask_indptr: torch.Tensor | None,
    max_len_extend: int,
    k_scale: float = 1.0,
    v_scale: float = 1.0,
    sm_scale: float | None = None,
    skip_prefix_custom_mask: bool = True,
) -> None:
    sm_scale = sm_scale or 1.0 / math.sqrt(q_extend.shape[-1])
    batch_size = qo_indptr.shape[0] - 1
    grid_blocks = -(-int(max_len_extend) // BLOCK_M)
    qo = qo_indptr.tolist()
    kv = kv_indptr.tolist()
    mask_start = mask_indptr.tolist() if custom_mask is not None and mask_indptr is not None else None

    for seq in range(batch_size):
        extend_start, extend_len = qo[seq], qo[seq + 1] - qo[seq]
        prefix_len = kv[seq + 1] - kv[seq]
        seq_len = prefix_len + extend_len
        prefix_locs = kv_indices[kv[seq] : kv[seq] + prefix_len]
        k_prefix = k_buffer[prefix_locs] * k_scale
        v_prefix = v_buffer[prefix_locs] * v_scale

        for block in range(grid_blocks):
            row0 = block * BLOCK_M
            rows = min(BLOCK_M, extend_len - row0)
            if rows <= 0:
                continue
            q = _load_rows(q_extend, extend_start + row0, rows)
            row_ids = torch.arange(row0, row0 + rows)

            keys = [k_prefix]
            values = [v_prefix]
            allowed = [torch.ones(rows, prefix_len, dtype=torch.bool)]
            if custom_mask is not None and mask_start is not None and not skip_prefix_custom_mask:
                index = mask_start[seq] + row_ids[:, None] * seq_len + torch.arange(prefix_len)[None, :]
                allowed[0] = _load_mask(custom_mask, index).bool()

            block_end = min(extend_len, (block + 1) * BLOCK_M) if is_causal else extend_len
            for start_n in range(0, block_end, BLOCK_N):
                cols = min(BLOCK_N, block_end - start_n)
                col_ids = torch.arange(start_n, start_n + cols)
                if custom_mask is not None and mask_start is not None:
                    index = mask_start[seq] + row_ids[:, None] * seq_len + prefix_len + col_ids[None, :]
                    tile = _load_mask(custom_mask, index).bool()
                    if not bool(tile.any()):
                        continue  # the kernel skips a fully masked tile
                elif is_causal:
                    tile = row_ids[:, None] >= col_ids[None, :]
                else:
                    tile = torch.ones(rows, cols, dtype=torch.bool)
                keys.append(_load_rows(k_extend, extend_start + start_n, cols))
                values.append(_load_rows(v_extend, extend_start + start_n, cols))
                allowed.append(tile)

            out = _attend(q, torch.cat(keys), torch.cat(values), torch.cat(allowed, dim=1), sm_scale)
            _store_rows(o_extend, extend_start + row0, out.to(o_extend.dtype))
