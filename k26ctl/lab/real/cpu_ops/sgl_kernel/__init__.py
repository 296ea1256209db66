"""A pure-torch `sgl_kernel` for running real SGLang 0.5.23 on a CPU without AMX.

SGLang 0.5.23 imports a few CPU ops from the `sgl_kernel` package at start-up, and the registry's
kernel wheels are CUDA builds that do not load without libcuda. This package, placed first on
PYTHONPATH for that server only, stands in for it:

- `assign_req_to_token_pool_cpu`, the one op plain serving calls, is implemented with torch;
- nothing is registered under `torch.ops.sgl_kernel`, so SGLang finds no AMX kernels and every layer
  takes its plain torch path;
- every other name is a callable that raises NotImplementedError naming the op, so a code path that
  needs a missing op fails loudly at its first call instead of computing something else.

Submodules (`sgl_kernel.kvcacheio`, ...) do not exist: importing one raises ImportError, which is
what SGLang's optional imports expect of a package that lacks them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

__version__ = "0.0.0+k26ctl.cpu"

IMPLEMENTED = ("assign_req_to_token_pool_cpu",)


def assign_req_to_token_pool_cpu(
    req_pool_indices: torch.Tensor,
    req_to_token: torch.Tensor,
    start_offset: torch.Tensor,
    end_offset: torch.Tensor,
    out_cache_loc: torch.Tensor,
    pool_len: int,
) -> None:
    """For each request i: req_to_token[req_pool_indices[i], start[i]:end[i]] takes the next
    end[i] - start[i] entries of out_cache_loc (requests packed one after another)."""
    taken = 0
    for row, start, end in zip(
        req_pool_indices.tolist(), start_offset.tolist(), end_offset.tolist(), strict=True
    ):
        count = end - start
        if count <= 0:
            continue
        if end > pool_len:
            raise ValueError(f"assign_req_to_token_pool_cpu: end {end} beyond the pool's {pool_len} slots")
        req_to_token[row, start:end] = out_cache_loc[taken : taken + count].to(req_to_token.dtype)
        taken += count


def _missing(name: str) -> Callable[..., Any]:
    def op(*_args: Any, **_kwargs: Any) -> Any:
        raise NotImplementedError(
            f"sgl_kernel.{name} is not implemented by k26ctl's pure-torch CPU stand-in "
            f"(only {', '.join(IMPLEMENTED)} is)"
        )

    op.__name__ = name
    op.__qualname__ = name
    return op


def __getattr__(name: str) -> Callable[..., Any]:
    if name.startswith("__"):
        raise AttributeError(name)  # import machinery and introspection ask for dunders
    return _missing(name)
