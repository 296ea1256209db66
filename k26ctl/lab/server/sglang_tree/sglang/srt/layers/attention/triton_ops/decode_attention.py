"""Torch emulation of the decode-attention kernel: one query row per request over its KV."""

from __future__ import annotations

import math

import torch

from sglang.srt.layers.attention.triton_ops.extend_attention import _attend


def decode_attention_fwd(
    q: torch.Tensor,
    k_buffer: torch.Tensor,
    v_buffer: torch.Tensor,
    o: torch.Tensor,
    kv_indptr: torch.Tensor,
    kv_indices: torch.Tensor,
    sm_scale: float | None = None,
) -> None:
    sm_scale = sm_scale or 1.0 / math.sqrt(q.shape[-1])
    kv = kv_indptr.tolist()
    for seq in range(q.shape[0]):
        locs = kv_indices[kv[seq] : kv[seq + 1]]
        allowed = torch.ones(1, locs.numel(), dtype=torch.bool)
        o[seq : seq + 1] = _attend(q[seq : seq + 1], k_buffer[locs], v_buffer[locs], allowed, sm_scale)
