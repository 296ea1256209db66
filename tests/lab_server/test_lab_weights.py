"""The shipped checkpoint: size, checksums checked on load, and bitwise-reproducible training."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from k26ctl.errors import ConfigError
from k26ctl.lab.server.train import train
from k26ctl.lab.server.weights import (
    DEFAULT_DRAFT_DIR,
    DEFAULT_MODEL_DIR,
    TOOLS_DRAFT_DIR,
    TOOLS_MODEL_DIR,
    load_model,
    verify_checksums,
)

pytestmark = pytest.mark.lab


def test_shipped_checkpoint_is_small_and_verified() -> None:
    size = sum(p.stat().st_size for p in DEFAULT_MODEL_DIR.iterdir())
    assert size < 600_000
    assert set(verify_checksums(DEFAULT_MODEL_DIR)) == {"config.json", "model.pt"}
    assert set(verify_checksums(DEFAULT_DRAFT_DIR)) == {"config.json", "corpus.txt"}
    # the tool-call checkpoint: the same corpus plus the tool-call chats, so its drafter knows the calls
    assert set(verify_checksums(TOOLS_MODEL_DIR)) == {"config.json", "model.pt"}
    assert set(verify_checksums(TOOLS_DRAFT_DIR)) == {"config.json", "corpus.txt"}
    plain, tools = ((d / "corpus.txt").read_text() for d in (DEFAULT_DRAFT_DIR, TOOLS_DRAFT_DIR))
    assert "<|tool_call_argument_begin|>" in tools and "<|tool_call_argument_begin|>" not in plain


def test_corrupt_checkpoint_is_refused(tmp_path: Path) -> None:
    copy = tmp_path / "model"
    shutil.copytree(DEFAULT_MODEL_DIR, copy)
    data = bytearray((copy / "model.pt").read_bytes())
    data[-100] ^= 0xFF
    (copy / "model.pt").write_bytes(bytes(data))
    with pytest.raises(ConfigError, match="does not match"):
        load_model(copy)
    with pytest.raises(ConfigError, match="not a directory"):
        load_model(tmp_path / "missing")


def test_training_is_bitwise_reproducible() -> None:
    threads = torch.get_num_threads()
    try:
        first, loss_a = train(steps=3, batch=4, seq_len=64, lr=3e-3, seed=5, log_every=1000)
        second, loss_b = train(steps=3, batch=4, seq_len=64, lr=3e-3, seed=5, log_every=1000)
    finally:
        torch.set_num_threads(threads)
    assert loss_a == loss_b
    for (name, a), (_, b) in zip(first.state_dict().items(), second.state_dict().items(), strict=True):
        assert torch.equal(a, b), name
