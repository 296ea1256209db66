"""Anchored source patches for the host's SGLang tree.

`model` loads the patch definitions (templates/patches/*.yaml), `engine` evaluates, applies and
reverts one patch on a text (pure), `host` does the same on a host's SGLang tree with checksums,
backups and byte-compilation, and `release` fetches real release sources for `patch check`.
"""

from __future__ import annotations

from k26ctl.patches.engine import State, apply_text, evaluate, revert_text, unified_diff
from k26ctl.patches.model import Edit, Patch, load_patches, select_patches

__all__ = [
    "Edit",
    "Patch",
    "State",
    "apply_text",
    "evaluate",
    "load_patches",
    "revert_text",
    "select_patches",
    "unified_diff",
]
