"""Helpers of the lab-server tests: the shipped model, trees (bundled and patched copies), engines,
and live `python -m k26ctl.lab.serve` processes on 127.0.0.1."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
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


PROJECT = str(project_root())


PATCH_FILE = project_root() / "templates" / "patches" / "triton-ddtree-verify-width.yaml"


BACKEND_REL = Path("sglang/srt/layers/attention/triton_backend.py")


def prompt_ids(n: int = 4) -> list[list[int]]:
    return [TOKENIZER.encode(p) for p in PROMPTS[:n]]


def patched_tree_copy(dest: Path) -> Path:
    """Copy the bundled tree to `dest` and apply the shipped triton-ddtree-verify-width patch to it."""
    from k26ctl.patches import apply_text, select_patches

    shutil.copytree(BUNDLED_TREE / "sglang", dest / "sglang", ignore=shutil.ignore_patterns("__pycache__"))
    (patch,) = select_patches(["triton-ddtree-verify-width"])
    target = dest / BACKEND_REL
    target.write_text(apply_text(patch, target.read_text()))
    return dest


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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class LiveServer:
    proc: subprocess.Popen[bytes]
    port: int
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for(self, text: str, timeout: float = 90.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.log():
                return True
            if self.proc.poll() is not None:
                return text in self.log()
            time.sleep(0.1)
        return False

    def wait_ready(self, timeout: float = 120.0) -> LiveServer:
        if not self.wait_for("The server is fired up and ready to roll!", timeout):
            self.stop()
            raise AssertionError(f"lab server did not become ready:\n{self.log()[-3000:]}")
        return self

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        return int(self.proc.returncode)


def start_server(
    tmp: Path, args: list[str], env: dict[str, str] | None = None, wait_ready: bool = True
) -> LiveServer:
    """Launch `python -m k26ctl.lab.serve` on a free loopback port (and wait for readiness)."""
    port = free_port()
    log_path = tmp / f"server-{port}.log"
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("K26LAB_", "SGLANG_"))}
    full_env.update(env or {})
    # the server runs the same checkout as the tests (the env's own PYTHONPATH, e.g. a patched tree, first)
    full_env["PYTHONPATH"] = os.pathsep.join(p for p in ((env or {}).get("PYTHONPATH"), PROJECT) if p)
    with open(log_path, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "k26ctl.lab.serve", "--host", "127.0.0.1", "--port", str(port), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=full_env,
            cwd=tmp,
        )
    server = LiveServer(proc, port, log_path)
    return server.wait_ready() if wait_ready else server
