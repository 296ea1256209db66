"""Fixtures of the lab-server tests (helpers live in helpers.py and tests/support/lab_server.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="the lab needs torch (pip install 'k26ctl[lab]')")

from k26ctl.lab.server.drafter import NGramDrafter  # noqa: E402
from k26ctl.lab.server.engine import SpecSettings  # noqa: E402
from k26ctl.lab.server.weights import DEFAULT_DRAFT_DIR, DEFAULT_MODEL_DIR, load_model  # noqa: E402
from tests.support.lab_server import LabServer, patched_tree, start_lab_server  # noqa: E402

from .helpers import PATCH_FILE, prompt_ids, run_engine  # noqa: E402


@pytest.fixture(scope="session")
def model() -> Any:
    torch.set_num_threads(1)
    return load_model(DEFAULT_MODEL_DIR)


@pytest.fixture(scope="session")
def drafter(model: Any) -> NGramDrafter:
    return NGramDrafter.load(DEFAULT_DRAFT_DIR, model.config.vocab_size)


@pytest.fixture(scope="session")
def patched_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not PATCH_FILE.is_file():
        pytest.skip("templates/patches/triton-ddtree-verify-width.yaml is not in this checkout")
    return patched_tree(tmp_path_factory.mktemp("patched-tree"))


@pytest.fixture(scope="session")
def plain_outputs(model: Any, drafter: NGramDrafter) -> list[list[int]]:
    """Plain greedy decoding, one request at a time."""
    return [run_engine(model, drafter, SpecSettings("NONE"), prompts=[ids])[0][0] for ids in prompt_ids()]


@pytest.fixture
def server_factory(tmp_path: Path) -> Iterator[Any]:
    started: list[LabServer] = []

    def factory(args: list[str], env: dict[str, str] | None = None, wait_ready: bool = True) -> LabServer:
        server = start_lab_server(tmp_path, args, env, wait_ready)
        started.append(server)
        return server

    yield factory
    for server in started:
        server.stop()
