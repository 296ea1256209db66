"""The shipped checkpoint: where it is, how it is written, and the checksum checked on load."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import torch

from k26ctl.errors import ConfigError
from k26ctl.lab.server.model import ModelConfig, TinyDecoder
from k26ctl.lab.server.paths import (
    DEFAULT_DRAFT_DIR,
    DEFAULT_MODEL_DIR,
    TOOLS_DRAFT_DIR,
    TOOLS_MODEL_DIR,
    WEIGHTS_ROOT,
)

__all__ = [
    "DEFAULT_DRAFT_DIR",
    "DEFAULT_MODEL_DIR",
    "TOOLS_DRAFT_DIR",
    "TOOLS_MODEL_DIR",
    "WEIGHTS_ROOT",
    "load_model",
    "save_model",
]

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.pt"
CHECKSUM_FILE = "SHA256SUMS"


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_checksums(directory: Path, names: list[str]) -> None:
    lines = [f"{sha256_file(directory / name)}  {name}\n" for name in sorted(names)]
    (directory / CHECKSUM_FILE).write_text("".join(lines))


def verify_checksums(directory: Path) -> list[str]:
    """Check every file listed in SHA256SUMS (the `sha256sum -c` format); return the names checked."""
    sums = directory / CHECKSUM_FILE
    if not sums.is_file():
        raise ConfigError(f"{directory}: no {CHECKSUM_FILE}", "the model directory is incomplete")
    checked = []
    for line in sums.read_text().splitlines():
        if not line.strip():
            continue
        expected, name = line.split(maxsplit=1)
        name = name.lstrip("*")
        path = directory / name
        if not path.is_file():
            raise ConfigError(f"{path}: listed in {CHECKSUM_FILE} but missing")
        actual = sha256_file(path)
        if actual != expected:
            raise ConfigError(
                f"{path}: sha256 {actual[:12]}... does not match {CHECKSUM_FILE} ({expected[:12]}...)",
                "the checkpoint is corrupt; copy it again",
            )
        checked.append(name)
    return checked


def save_model(model: TinyDecoder, directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / CONFIG_FILE).write_text(json.dumps(model.config.to_json(), indent=2) + "\n")
    state = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    torch.save(state, directory / WEIGHTS_FILE)
    write_checksums(directory, [CONFIG_FILE, WEIGHTS_FILE])


def load_model(directory: Path) -> TinyDecoder:
    if not directory.is_dir():
        raise ConfigError(f"model path {directory} is not a directory", "pass --model-path DIR")
    verify_checksums(directory)
    config = ModelConfig.from_file(directory / CONFIG_FILE)
    model = TinyDecoder(config)
    state = torch.load(directory / WEIGHTS_FILE, map_location="cpu", weights_only=True)
    model.load_state_dict(state)
    model.eval()
    return model
