"""Base class: dispatch a layer's attention by forward mode."""

from __future__ import annotations

from typing import Any

import torch


class AttentionBackend:
    def init_forward_metadata(self, forward_batch: Any) -> None:
        raise NotImplementedError

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layer: Any, forward_batch: Any
    ) -> torch.Tensor:
        if forward_batch.forward_mode.is_decode():
            return self.forward_decode(q, k, v, layer, forward_batch)
        return self.forward_extend(q, k, v, layer, forward_batch)

    def forward_decode(self, q: Any, k: Any, v: Any, layer: Any, forward_batch: Any) -> torch.Tensor:
        raise NotImplementedError

    def forward_extend(self, q: Any, k: Any, v: Any, layer: Any, forward_batch: Any) -> torch.Tensor:
        raise NotImplementedError
