"""Anchored source patches for the host's SGLang tree.

`model` loads the patch definitions (templates/patches/*.yaml), `engine` evaluates, applies and
reverts one patch on a text (pure), `host` does the same on a host's SGLang tree with checksums,
backups and byte-compilation, and `release` fetches real release sources for `patch check`.
"""

from __future__ import annotations

from k26ctl.patches.engine import State, apply_text, evaluate, revert_text, unified_diff
from k26ctl.patches.host import (
    PatchAction,
    PatchResult,
    PatchState,
    SGLangTree,
    apply_patches,
    execute_plan,
    find_package_root,
    locate_sglang,
    patch_status,
    plan_patches,
    revert_patches,
)
from k26ctl.patches.model import Edit, Patch, load_patches, select_patches

__all__ = [
    "Edit",
    "Patch",
    "PatchAction",
    "PatchResult",
    "PatchState",
    "SGLangTree",
    "State",
    "apply_patches",
    "apply_text",
    "evaluate",
    "execute_plan",
    "find_package_root",
    "load_patches",
    "locate_sglang",
    "patch_status",
    "plan_patches",
    "revert_patches",
    "revert_text",
    "select_patches",
    "unified_diff",
]
