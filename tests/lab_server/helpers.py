"""Helpers of the lab-server tests: prompts, the shipped patch, and engines run in this process (live
servers come from tests/support/lab_server.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="the lab needs torch (pip install 'k26ctl[lab]')")

from k26ctl.lab.server.drafter import NGramDrafter  # noqa: E402
from k26ctl.lab.server.engine import Engine, SpecSettings  # noqa: E402
from k26ctl.lab.server.tokenizer import ByteTokenizer, render_chat  # noqa: E402
from k26ctl.lab.server.tree_loader import BUNDLED_TREE, LabTree, import_tree  # noqa: E402
from k26ctl.resources import project_root  # noqa: E402

TOKENIZER = ByteTokenizer()


STOPS = {TOKENIZER.eos_id, TOKENIZER.im_end_id}


PROMPTS = [
    render_chat([{"role": "user", "content": "What is the capital of France?"}]),
    render_chat([{"role": "user", "content": "Tell me a short story."}], thinking=False),
    "The lighthouse stood",
    "Bread is made from",
]


MAX_NEW = 80


PATCH_FILE = project_root() / "templates" / "patches" / "triton-ddtree-verify-width.yaml"


BACKEND_REL = Path("sglang/srt/layers/attention/triton_backend.py")


def prompt_ids(n: int = 4) -> list[list[int]]:
    return [TOKENIZER.encode(p) for p in PROMPTS[:n]]


def run_engine(
    model: Any,
    drafter: NGramDrafter,
    spec: SpecSettings,
    *,
    root: Path | None = None,
    prompts: list[list[int]] | None = None,
    unvisited: str = "nan",
    scope: str = "all",
    max_new: int = MAX_NEW,
) -> tuple[list[list[int]], float]:
    """Greedy outputs of one batch and the mean accept length (tokens per verify pass)."""
    tree: LabTree = import_tree(root or BUNDLED_TREE)
    tree.lab_memory.configure(unvisited=unvisited, scope=scope)
    engine = Engine(model, tree, spec, drafter if spec.algorithm != "NONE" else None)
    reqs = engine.generate(prompts if prompts is not None else prompt_ids(), max_new, STOPS)
    verify = sum(r.verify_ct for r in reqs)
    # the first token of each request comes from prefill, not from a verify pass
    accept = sum(len(r.output_ids) - 1 for r in reqs) / verify if verify else 0.0
    return [r.output_ids for r in reqs], accept
