"""Torch versions of the flashinfer.sampling names SGLang imports (used only if a flashinfer sampling
path is taken by mistake; the GPU check runs --sampling-backend pytorch)."""

from __future__ import annotations

from typing import Any

import torch


def _per_row(value: Any, rows: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    if torch.is_tensor(value):
        return value.to(device=device, dtype=dtype).view(-1)
    return torch.full((rows,), value, device=device, dtype=dtype)


def _filtered(probs: torch.Tensor, top_k: Any = None, top_p: Any = None, min_p: Any = None) -> torch.Tensor:
    p = probs.float()
    rows, vocab = p.shape
    if top_k is not None:
        k = _per_row(top_k, rows, p.device, torch.long).clamp(1, vocab)
        kth = p.sort(dim=-1, descending=True).values.gather(1, (k - 1).view(-1, 1))
        p = torch.where(p < kth, torch.zeros_like(p), p)
    if top_p is not None:
        limit = _per_row(top_p, rows, p.device, torch.float32).view(-1, 1)
        ordered, order = p.sort(dim=-1, descending=True)
        share = ordered / ordered.sum(-1, keepdim=True)
        before = share.cumsum(-1) - share  # probability mass ranked above each token
        p = torch.zeros_like(p).scatter(1, order, ordered.masked_fill(before > limit, 0))
    if min_p is not None:
        floor = _per_row(min_p, rows, p.device, torch.float32).view(-1, 1) * p.max(-1, keepdim=True).values
        p = torch.where(p < floor, torch.zeros_like(p), p)
    return p / p.sum(-1, keepdim=True)


def top_k_top_p_sampling_from_probs(
    probs: torch.Tensor, top_k: Any, top_p: Any, *args: Any, generator: Any = None, **kwargs: Any
) -> torch.Tensor:
    return torch.multinomial(_filtered(probs, top_k, top_p), 1, generator=generator).view(-1).int()


def min_p_sampling_from_probs(
    probs: torch.Tensor, min_p: Any, *args: Any, generator: Any = None, **kwargs: Any
) -> torch.Tensor:
    return torch.multinomial(_filtered(probs, min_p=min_p), 1, generator=generator).view(-1).int()


def top_k_renorm_probs(probs: torch.Tensor, top_k: Any, **kwargs: Any) -> torch.Tensor:
    return _filtered(probs, top_k=top_k).to(probs.dtype)


def top_p_renorm_probs(probs: torch.Tensor, top_p: Any, **kwargs: Any) -> torch.Tensor:
    return _filtered(probs, top_p=top_p).to(probs.dtype)
