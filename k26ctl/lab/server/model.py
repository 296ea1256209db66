"""The lab's tiny decoder: byte embeddings, RoPE attention blocks, tied output head.

Training runs plain causal attention over whole windows; serving runs every layer's attention
through an attention backend (the lab tree's TritonAttnBackend) over a paged KV pool, exactly the
split SGLang has between a model and its attention backend.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int = 264
    hidden_size: int = 64
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    intermediate_size: int = 256
    rope_theta: float = 10000.0
    max_position_embeddings: int = 4096

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def num_key_value_heads(self) -> int:
        return self.num_attention_heads

    def to_json(self) -> dict[str, Any]:
        return {"architectures": ["K26LabTinyForCausalLM"], "model_type": "k26lab-tiny", **asdict(self)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ModelConfig:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    @classmethod
    def from_file(cls, path: Path) -> ModelConfig:
        return cls.from_json(json.loads(path.read_text()))


@dataclass(frozen=True)
class AttentionLayer:
    """What an attention backend needs to know about a layer (SGLang's RadixAttention fields)."""

    layer_id: int
    tp_q_head_num: int
    tp_k_head_num: int
    tp_v_head_num: int
    qk_head_dim: int
    v_head_dim: int
    scaling: float


def _rope(x: torch.Tensor, positions: torch.Tensor, theta: float) -> torch.Tensor:
    # x [..., T, H, D] with positions [..., T]
    half = x.shape[-1] // 2
    freqs = theta ** (-torch.arange(half, dtype=torch.float32) / half)
    angles = positions.to(torch.float32).unsqueeze(-1) * freqs  # [..., T, half]
    cos = angles.cos().unsqueeze(-2)
    sin = angles.sin().unsqueeze(-2)
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


class Block(nn.Module):
    def __init__(self, config: ModelConfig, layer_id: int) -> None:
        super().__init__()
        d = config.hidden_size
        self.attn_norm = nn.RMSNorm(d, eps=1e-5)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.o_proj = nn.Linear(d, d, bias=False)
        self.mlp_norm = nn.RMSNorm(d, eps=1e-5)
        self.up = nn.Linear(d, config.intermediate_size, bias=False)
        self.down = nn.Linear(config.intermediate_size, d, bias=False)
        self.attn = AttentionLayer(
            layer_id=layer_id,
            tp_q_head_num=config.num_attention_heads,
            tp_k_head_num=config.num_key_value_heads,
            tp_v_head_num=config.num_key_value_heads,
            qk_head_dim=config.head_dim,
            v_head_dim=config.head_dim,
            scaling=1.0 / math.sqrt(config.head_dim),
        )

    def mlp(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.gelu(self.up(self.mlp_norm(x))))


class TinyDecoder(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.hidden_size)
        self.blocks = nn.ModuleList(Block(config, i) for i in range(config.num_hidden_layers))
        self.norm = nn.RMSNorm(config.hidden_size, eps=1e-5)
        nn.init.normal_(self.embed.weight, std=0.02)  # tied with the output head

    def _logits(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x) @ self.embed.weight.T

    def _split_heads(self, block: Block, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        h = self.config.num_attention_heads
        q, k, v = block.qkv(block.attn_norm(x)).chunk(3, dim=-1)
        shape = (*x.shape[:-1], h, self.config.head_dim)
        return q.reshape(shape), k.reshape(shape), v.reshape(shape)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """Training/reference path: ids [B, T] -> logits [B, T, V] with causal attention."""
        x = self.embed(ids)
        positions = torch.arange(ids.shape[1]).expand(ids.shape[0], -1)
        for block in self.blocks:
            assert isinstance(block, Block)
            q, k, v = self._split_heads(block, x)
            q = _rope(q, positions, self.config.rope_theta).transpose(1, 2)
            k = _rope(k, positions, self.config.rope_theta).transpose(1, 2)
            attn = F.scaled_dot_product_attention(q, k, v.transpose(1, 2), is_causal=True)
            x = x + block.o_proj(attn.transpose(1, 2).reshape(x.shape))
            x = x + block.mlp(x)
        return self._logits(x)

    @torch.no_grad()
    def forward_batch(self, forward_batch: Any, attn_backend: Any) -> torch.Tensor:
        """Serving path: flat rows of a ForwardBatch -> logits [rows, V]."""
        attn_backend.init_forward_metadata(forward_batch)
        x = self.embed(forward_batch.input_ids)
        positions = forward_batch.positions
        for block in self.blocks:
            assert isinstance(block, Block)
            q, k, v = self._split_heads(block, x)
            q = _rope(q, positions, self.config.rope_theta)
            k = _rope(k, positions, self.config.rope_theta)
            rows = x.shape[0]
            o = attn_backend.forward(
                q.reshape(rows, -1), k.reshape(rows, -1), v.reshape(rows, -1), block.attn, forward_batch
            )
            x = x + block.o_proj(o)
            x = x + block.mlp(x)
        return self._logits(x)
