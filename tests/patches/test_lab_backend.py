"""The patch on the lab's SGLang-shaped tree: apply/revert, and the patched backend's widths."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from k26ctl.patches import apply_patches, patch_status, revert_patches
from k26ctl.resources import project_root
from tests.patches.patch_support import PATCH, TARGET, RecordingHost, make_profile

LAB_TREE = project_root() / "k26ctl" / "lab" / "server" / "sglang_tree" / "sglang"

pytestmark = pytest.mark.skipif(
    not (LAB_TREE / TARGET).is_file(), reason="the lab tree is not in this checkout"
)

# Builds the lab backend with a minimal model runner and runs the metadata step of one
# target-verify batch (two requests with 5 and 9 cached tokens), printing the widths it used.
PROBE = r"""
import json, sys
from types import SimpleNamespace
import torch
from sglang.srt.layers.attention.triton_backend import TritonAttnBackend
from sglang.srt.model_executor.forward_batch_info import ForwardBatch, ForwardMode, SpecVerifyInfo

def widths(algorithm, is_draft_worker, budget=16, block=8, rows=None):
    args = SimpleNamespace(speculative_algorithm=algorithm, speculative_num_draft_tokens=block,
                           speculative_ddtree_budget=budget, speculative_num_steps=1,
                           speculative_eagle_topk=1)
    pool = SimpleNamespace(size=4, req_to_token=torch.arange(4 * 64).reshape(4, 64))
    runner = SimpleNamespace(server_args=args, is_draft_worker=is_draft_worker, device="cpu",
                             req_to_token_pool=pool, token_to_kv_pool=None,
                             model_config=SimpleNamespace(num_attention_heads=2))
    backend = TritonAttnBackend(runner)
    rows = rows or (budget + 1 if not is_draft_worker else block)
    seq_lens = torch.tensor([5, 9])
    mask = torch.ones(int((rows * (seq_lens + rows)).sum()), dtype=torch.bool)
    batch = ForwardBatch(forward_mode=ForwardMode.TARGET_VERIFY, batch_size=2,
                         input_ids=torch.zeros(2 * rows, dtype=torch.int64),
                         positions=torch.zeros(2 * rows, dtype=torch.int64),
                         req_pool_indices=torch.tensor([0, 1]), seq_lens=seq_lens,
                         out_cache_loc=torch.zeros(2 * rows, dtype=torch.int64),
                         spec_info=SpecVerifyInfo(custom_mask=mask, draft_token_num=rows))
    backend.init_forward_metadata(batch)
    meta = backend.forward_metadata
    return {"num_draft_tokens": backend.num_draft_tokens, "max_extend_len": meta.max_extend_len,
            "qo_indptr": meta.qo_indptr.tolist(), "mask_indptr": meta.mask_indptr.tolist()}

class Algo:
    name = "DDTREE"

print(json.dumps({
    "target_ddtree": widths("DDTREE", False),
    "target_ddtree_lowercase": widths("ddtree", False, budget=3),
    "target_ddtree_enum": widths(Algo(), False, budget=11),
    "draft_ddtree": widths("DDTREE", True),
    "target_dflash": widths("DFLASH", False, budget=None, rows=8),
}))
"""


def _probe(tree_parent: Path) -> dict[str, dict[str, object]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("K26LAB_")}
    env["PYTHONPATH"] = str(tree_parent)
    proc = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, env=env, cwd=tree_parent
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    result: dict[str, dict[str, object]] = json.loads(proc.stdout)
    return result


def _copy_tree(tmp_path: Path) -> Path:
    root = tmp_path / "lab" / "sglang"
    shutil.copytree(LAB_TREE, root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def test_apply_and_revert_on_the_lab_tree(tmp_path: Path) -> None:
    root = _copy_tree(tmp_path)
    target = root / TARGET
    original = target.read_bytes()
    host = RecordingHost()
    profile = make_profile(root)
    assert [s.state for s in patch_status(host, profile)] == ["pending"]
    [applied] = apply_patches(host, profile)
    assert applied.changed
    [again] = apply_patches(host, profile)
    assert not again.changed
    [undone] = revert_patches(host, profile)
    assert undone.changed and target.read_bytes() == original


@pytest.mark.lab
def test_patched_lab_backend_uses_budget_plus_one_rows_on_the_target_only(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    root = _copy_tree(tmp_path)
    before = _probe(root.parent)
    # unpatched: the target sizes verify rows from the block size (8) whatever the budget
    assert before["target_ddtree"]["num_draft_tokens"] == 8
    assert before["target_ddtree"]["qo_indptr"] == [0, 8, 16]

    apply_patches(RecordingHost(), make_profile(root, [PATCH]))
    after = _probe(root.parent)
    target = after["target_ddtree"]
    assert target["num_draft_tokens"] == 17 and target["max_extend_len"] == 17
    assert target["qo_indptr"] == [0, 17, 34]
    assert target["mask_indptr"] == [0, 17 * (5 + 17), 17 * (5 + 17) + 17 * (9 + 17)]
    assert after["target_ddtree_lowercase"]["num_draft_tokens"] == 4  # budget 3: broken unpatched too
    assert after["target_ddtree_enum"]["num_draft_tokens"] == 12  # an enum-like algorithm, by .name
    draft = after["draft_ddtree"]
    assert draft["num_draft_tokens"] == 8 and draft["qo_indptr"] == [0, 8, 16]
    assert draft["mask_indptr"] == [0, 8 * (5 + 8), 8 * (5 + 8) + 8 * (9 + 8)]
    assert after["target_dflash"]["num_draft_tokens"] == 8
