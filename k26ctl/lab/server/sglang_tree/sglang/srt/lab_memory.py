"""What the lab's `torch.empty` memory holds, and its bug-scope switch.

On a GPU, rows of an output buffer that no kernel program writes keep whatever the caching
allocator handed out. The lab makes that choice explicit and reproducible:
- "nan": fresh buffers are full of NaN (a worst case that poisons everything downstream);
- "stale": fresh buffers start with what the previous buffer left behind (finite garbage).
Reads past the end of a tensor (a kernel indexing with the wrong stride) see the same memory.
The scope switch selects which verify metadata follows the backend's width: "all" (qo_indptr,
mask_indptr and max_extend_len) or "mask-only" (just mask_indptr).
"""

from __future__ import annotations

import os

import torch

UNVISITED_MODES = ("nan", "stale")
BUG_SCOPES = ("all", "mask-only")

_state = {
    "unvisited": os.environ.get("K26LAB_UNVISITED", "nan"),
    "scope": os.environ.get("K26LAB_BUG_SCOPE", "all"),
}
_arena = torch.zeros(0)


def configure(unvisited: str | None = None, scope: str | None = None) -> None:
    if unvisited is not None:
        if unvisited not in UNVISITED_MODES:
            raise ValueError(f"K26LAB_UNVISITED must be one of {UNVISITED_MODES}, got {unvisited!r}")
        _state["unvisited"] = unvisited
    if scope is not None:
        if scope not in BUG_SCOPES:
            raise ValueError(f"K26LAB_BUG_SCOPE must be one of {BUG_SCOPES}, got {scope!r}")
        _state["scope"] = scope
    reset()


def unvisited_mode() -> str:
    return _state["unvisited"]


def bug_scope() -> str:
    return _state["scope"]


def reset() -> None:
    global _arena
    _arena = torch.zeros(0)


def _arena_slice(offset: int, numel: int) -> torch.Tensor:
    global _arena
    if _arena.numel() < offset + numel:
        grown = torch.zeros(offset + numel)
        grown[: _arena.numel()] = _arena
        _arena = grown
    return _arena[offset : offset + numel]


def empty_like(t: torch.Tensor) -> torch.Tensor:
    """A new buffer shaped like `t` whose content is whatever the memory model says it held."""
    if _state["unvisited"] == "nan":
        return torch.full_like(t, float("nan"))
    return _arena_slice(0, t.numel()).clone().view(t.shape).to(t.dtype)


def release(t: torch.Tensor) -> None:
    """The buffer is done with: its bytes stay in memory for the next allocation to find."""
    if _state["unvisited"] == "stale":
        _arena_slice(0, t.numel()).copy_(t.detach().reshape(-1).float())


def beyond_end(t: torch.Tensor, first_row: int, rows: int) -> torch.Tensor:
    """Rows read past the end of `t` (row index >= len(t))."""
    shape = (rows, *t.shape[1:])
    if _state["unvisited"] == "nan":
        return torch.full(shape, float("nan"), dtype=t.dtype)
    row_numel = 1
    for n in t.shape[1:]:
        row_numel *= n
    return _arena_slice(first_row * row_numel, rows * row_numel).clone().view(shape).to(t.dtype)
