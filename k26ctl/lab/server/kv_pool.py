"""KV memory for the lab model: request slots, a token-slot allocator and per-layer K/V buffers.

Freed token slots keep their contents, like GPU memory does; nothing is zeroed on free.
"""

from __future__ import annotations

from typing import Any

import torch


class ReqToTokenPool:
    def __init__(self, size: int, max_context_len: int) -> None:
        self.size = size
        self.req_to_token = torch.zeros((size, max_context_len), dtype=torch.int64)
        self._free = list(range(size))

    def alloc(self) -> int | None:
        return self._free.pop(0) if self._free else None

    def free(self, index: int) -> None:
        self._free.append(index)

    def available(self) -> int:
        return len(self._free)


class TokenToKVPool:
    def __init__(self, size: int, num_layers: int, num_heads: int, head_dim: int) -> None:
        self.size = size
        self.k_buffer = [torch.zeros(size, num_heads, head_dim) for _ in range(num_layers)]
        self.v_buffer = [torch.zeros(size, num_heads, head_dim) for _ in range(num_layers)]
        self._free = torch.arange(size, dtype=torch.int64)
        self._num_free = size

    def get_key_buffer(self, layer_id: int) -> torch.Tensor:
        return self.k_buffer[layer_id]

    def get_value_buffer(self, layer_id: int) -> torch.Tensor:
        return self.v_buffer[layer_id]

    def set_kv_buffer(self, layer: Any, loc: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        shape = (-1, layer.tp_k_head_num, layer.qk_head_dim)
        self.k_buffer[layer.layer_id][loc] = k.reshape(shape)
        self.v_buffer[layer.layer_id][loc] = v.reshape(shape)

    def available(self) -> int:
        return self._num_free

    def alloc(self, n: int) -> torch.Tensor | None:
        if n > self._num_free:
            return None
        out = self._free[:n].clone()
        self._free = self._free[n:]
        self._num_free -= n
        return out

    def free(self, loc: torch.Tensor) -> None:
        if loc.numel():
            self._free = torch.cat([self._free, loc.to(torch.int64)])
            self._num_free += loc.numel()

    def used(self) -> int:
        return self.size - self._num_free
