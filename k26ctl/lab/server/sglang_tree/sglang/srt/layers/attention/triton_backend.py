"""Attention backend of the lab tree, laid out like SGLang 0.5.15's Triton backend.

`TritonAttnBackend` computes the per-batch metadata (kv_indptr/kv_indices, and for target verify
qo_indptr, mask_indptr, max_extend_len) and runs the torch emulations of the Triton kernels. The
lines that size the speculative verify carry the same text as SGLang 0.5.15, so a patch anchored on
them applies here: the init line that copies `speculative_num_draft_tokens`, and in the
target-verify branch the `qo_indptr` arange, the `seq_mask_len` statement, the `mask_indptr`
cumsum and `max_extend_len`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from sglang.srt import lab_memory
from sglang.srt.layers.attention.base_attn_backend import AttentionBackend

if TYPE_CHECKING:
    from sglang.srt.model_executor.forward_batch_info import ForwardBatch


@dataclass
class ForwardMetadata:
    max_extend_len: int | None
    kv_indptr: torch.Tensor
    kv_indices: torch.Tensor
    qo_indptr: torch.Tensor | None
    custom_mask: torch.Tensor | None
    mask_indptr: torch.Tensor | None


class TritonAttnBackend(AttentionBackend):
    def __init__(
        self,
        model_runner: Any,
        skip_prefill: bool = False,
        kv_indptr_buf: torch.Tensor | None = None,
    ):
        from sglang.srt.layers.attention.triton_ops.decode_attention import (
            decode_attention_fwd,
        )
        from sglang.srt.layers.attention.triton_ops.extend_attention import (
            extend_attention_fwd,
        )

        super().__init__()

        self.decode_attention_fwd = decode_attention_fwd
        self.extend_attention_fwd = extend_attention_fwd

        # Parse args
        self.skip_prefill = skip_prefill
        max_bs = model_runner.req_to_token_pool.size
        self.req_to_token_pool = model_runner.req_to_token_pool
        self.token_to_kv_pool = model_runner.token_to_kv_pool
        self.req_to_token = model_runner.req_to_token_pool.req_to_token
        self.num_draft_tokens = model_runner.server_args.speculative_num_draft_tokens
        self.num_head = model_runner.model_config.num_attention_heads
        self.device = model_runner.device

        if kv_indptr_buf is None:
            self.kv_indptr = torch.zeros((max_bs + 1,), dtype=torch.int32, device=self.device)
        else:
            self.kv_indptr = kv_indptr_buf
        self.mask_indptr = torch.zeros((max_bs + 1,), dtype=torch.int64, device=self.device)
        self.forward_metadata: ForwardMetadata | None = None

    def _fill_kv_indptr_and_indices(
        self,
        bs: int,
        seq_lens: torch.Tensor,
        req_pool_indices: torch.Tensor,
        kv_indices: torch.Tensor,
    ) -> torch.Tensor:
        kv_indptr = self.kv_indptr
        kv_indptr[1 : bs + 1] = torch.cumsum(seq_lens[:bs], dim=0)
        kv_indptr = kv_indptr[: bs + 1]
        pairs = zip(req_pool_indices.tolist(), seq_lens[:bs].tolist(), strict=True)
        for i, (pool_index, length) in enumerate(pairs):
            start = int(kv_indptr[i])
            kv_indices[start : start + length] = self.req_to_token[pool_index, :length]
        return kv_indptr

    def init_forward_metadata(self, forward_batch: ForwardBatch) -> None:
        """Init auxiliary variables for the attention kernels of one forward pass."""
        bs = forward_batch.batch_size
        spec_info = forward_batch.spec_info

        if forward_batch.forward_mode.is_decode():
            kv_indices = torch.empty(int(forward_batch.seq_lens.sum()), dtype=torch.int64, device=self.device)
            kv_indptr = self._fill_kv_indptr_and_indices(
                bs,
                forward_batch.seq_lens,
                forward_batch.req_pool_indices,
                kv_indices,
            )
            qo_indptr = None
            custom_mask = None
            mask_indptr = None
            max_extend_len = None
        elif forward_batch.forward_mode.is_target_verify():
            bs = len(forward_batch.req_pool_indices)
            qo_indptr = torch.arange(
                0,
                (1 + bs) * self.num_draft_tokens,
                step=self.num_draft_tokens,
                dtype=torch.int32,
                device=self.device,
            )
            if lab_memory.bug_scope() == "mask-only":
                # Lab switch: rows follow the worker's layout, only the mask offsets below do not.
                qo_indptr = torch.arange(
                    0,
                    (1 + bs) * spec_info.draft_token_num,
                    step=spec_info.draft_token_num,
                    dtype=torch.int32,
                    device=self.device,
                )
            kv_indices = torch.empty(int(forward_batch.seq_lens.sum()), dtype=torch.int64, device=self.device)
            kv_indptr = self._fill_kv_indptr_and_indices(
                bs,
                forward_batch.seq_lens,
                forward_batch.req_pool_indices,
                kv_indices,
            )

            custom_mask = spec_info.custom_mask
            seq_mask_len = self.num_draft_tokens * (
                forward_batch.seq_lens + self.num_draft_tokens
            )
            mask_indptr = self.mask_indptr
            mask_indptr[1 : bs + 1] = torch.cumsum(seq_mask_len[:bs], dim=0)
            mask_indptr = mask_indptr[: bs + 1]
            max_extend_len = self.num_draft_tokens
            if lab_memory.bug_scope() == "mask-only":
                max_extend_len = spec_info.draft_token_num
        else:
            prefix_lens = forward_batch.extend_prefix_lens
            extend_lens = forward_batch.extend_seq_lens
            kv_indices = torch.empty(int(prefix_lens.sum()), dtype=torch.int64, device=self.device)
            kv_indptr = self._fill_kv_indptr_and_indices(
                bs,
                prefix_lens,
                forward_batch.req_pool_indices,
                kv_indices,
            )
            qo_indptr = torch.zeros((bs + 1,), dtype=torch.int32, device=self.device)
            qo_indptr[1 : bs + 1] = torch.cumsum(extend_lens[:bs], dim=0)
            custom_mask = None
            mask_indptr = None
            max_extend_len = int(extend_lens.max())

        self.forward_metadata = ForwardMetadata(
            max_extend_len,
            kv_indptr,
            kv_indices,
            qo_indptr,
            custom_mask,
            mask_indptr,
        )

    def forward_extend(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        layer: Any,
        forward_batch: ForwardBatch,
        save_kv_cache: bool = True,
    ) -> torch.Tensor:
        o = lab_memory.empty_like(q)
        if save_kv_cache:
            self.token_to_kv_pool.set_kv_buffer(layer, forward_batch.out_cache_loc, k, v)

        metadata = self.forward_metadata
        assert metadata is not None and metadata.qo_indptr is not None
        self.extend_attention_fwd(
            q.view(-1, layer.tp_q_head_num, layer.qk_head_dim),
            k.view(-1, layer.tp_k_head_num, layer.qk_head_dim),
            v.view(-1, layer.tp_v_head_num, layer.v_head_dim),
            o.view(-1, layer.tp_q_head_num, layer.v_head_dim),
            self.token_to_kv_pool.get_key_buffer(layer.layer_id),
            self.token_to_kv_pool.get_value_buffer(layer.layer_id),
            metadata.qo_indptr,
            metadata.kv_indptr,
            metadata.kv_indices,
            metadata.custom_mask,
            True,
            metadata.mask_indptr,
            metadata.max_extend_len,
            1.0,
            1.0,
            layer.scaling,
        )
        lab_memory.release(o)
        return o

    def forward_decode(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        layer: Any,
        forward_batch: ForwardBatch,
        save_kv_cache: bool = True,
    ) -> torch.Tensor:
        o = lab_memory.empty_like(q)
        if save_kv_cache:
            self.token_to_kv_pool.set_kv_buffer(layer, forward_batch.out_cache_loc, k, v)

        metadata = self.forward_metadata
        assert metadata is not None
        self.decode_attention_fwd(
            q.view(-1, layer.tp_q_head_num, layer.qk_head_dim),
            self.token_to_kv_pool.get_key_buffer(layer.layer_id),
            self.token_to_kv_pool.get_value_buffer(layer.layer_id),
            o.view(-1, layer.tp_q_head_num, layer.v_head_dim),
            metadata.kv_indptr,
            metadata.kv_indices,
            layer.scaling,
        )
        lab_memory.release(o)
        return o
