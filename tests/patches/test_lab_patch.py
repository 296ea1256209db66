"""The lab-only patch that breaks real SGLang 0.5.15 on purpose (`lab-verify-width-cap`), against the
release's own source: it anchors, changes only the mask offsets of the target-verify path, and is
reverted byte for byte."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from k26ctl.patches import apply_patches, load_patches, revert_patches
from tests.patches.patch_support import TARGET, RecordingHost, ReleaseSources, make_profile

pytestmark = pytest.mark.network_sglang

LAB_PATCH = "lab-verify-width-cap"


def _function(source: str, name: str) -> str:
    tree = ast.parse(source)
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name)
    return ast.get_source_segment(source, node) or ""


def test_lab_patch_changes_only_the_mask_offsets_of_the_verify_path(
    releases: ReleaseSources, host: RecordingHost, tmp_path: Path
) -> None:
    root = releases.copy("0.5.15", tmp_path)
    target = root / TARGET
    original = target.read_text()
    profile = make_profile(root, patches=[LAB_PATCH])
    assert "LAB ONLY" in load_patches()[LAB_PATCH].summary

    [applied] = apply_patches(host, profile)
    assert applied.changed and applied.state == "applied"
    patched = target.read_text()
    compile(patched, str(target), "exec")
    capped = "min(self.num_draft_tokens, 8)"
    # both builders of mask_indptr take the capped width; nothing else in the file changed
    for function in ("init_forward_metadata", "_update_target_verify_buffers"):
        body = _function(patched, function)
        at = body.index(capped)
        assert body.index("mask_indptr[1 : bs + 1] = torch.cumsum(", at) > at
        assert capped not in _function(original, function)
    added = [line for line in patched.splitlines() if line not in original.splitlines()]
    assert sum(line.count(capped) for line in added) == 4  # width and offset, in both builders
    assert all("qo_indptr" not in line and "max_extend_len" not in line for line in added)
    # the verify rows keep the real width: qo_indptr still steps by self.num_draft_tokens
    assert patched.count("step=self.num_draft_tokens,") == original.count("step=self.num_draft_tokens,")

    [reverted] = revert_patches(host, profile)
    assert reverted.changed and target.read_text() == original
