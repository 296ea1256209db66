"""ForwardMode and ForwardBatch, with the fields the lab's attention backend reads."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

import torch


class ForwardMode(enum.IntEnum):
    EXTEND = enum.auto()
    DECODE = enum.auto()
    TARGET_VERIFY = enum.auto()

    def is_extend(self) -> bool:
        return self == ForwardMode.EXTEND

    def is_decode(self) -> bool:
        return self == ForwardMode.DECODE

    def is_target_verify(self) -> bool:
        return self == ForwardMode.TARGET_VERIFY


@dataclass
class SpecVerifyInfo:
    """What a speculative worker hands the target for one verify pass."""

    custom_mask: torch.Tensor  # flat bool, per request draft_token_num x (prefix + draft_token_num)
    draft_token_num: int  # rows per request as the worker laid them out


@dataclass
class ForwardBatch:
    forward_mode: ForwardMode
    batch_size: int
    input_ids: torch.Tensor
    positions: torch.Tensor
    req_pool_indices: torch.Tensor
    seq_lens: torch.Tensor  # tokens already in the KV cache (decode: including the new one)
    out_cache_loc: torch.Tensor
    extend_prefix_lens: torch.Tensor | None = None
    extend_seq_lens: torch.Tensor | None = None
    spec_info: SpecVerifyInfo | None = None
    extra: dict[str, Any] | None = None
