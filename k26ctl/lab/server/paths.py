"""Where the shipped lab checkpoints live (no torch import, so the command line stays fast)."""

from __future__ import annotations

from pathlib import Path

WEIGHTS_ROOT = Path(__file__).resolve().parent / "weights"
DEFAULT_MODEL_DIR = WEIGHTS_ROOT / "k26lab-tiny"
DEFAULT_DRAFT_DIR = WEIGHTS_ROOT / "k26lab-tiny-dflash"
# trained on the corpus plus the tool-call chats (python -m k26ctl.lab.train --tools)
TOOLS_MODEL_DIR = WEIGHTS_ROOT / "k26lab-tiny-tools"
TOOLS_DRAFT_DIR = WEIGHTS_ROOT / "k26lab-tiny-tools-dflash"
