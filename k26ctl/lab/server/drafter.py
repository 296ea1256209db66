"""Block drafter: per-position distributions q_1..q_L for the L tokens after the root, all at once.

The lab's stand-in for a DFlash block-diffusion drafter is an n-gram model over the training
corpus: it finds the longest suffix of the context (root included) that occurs in the corpus and
counts, for each depth d, which token stood d places after each occurrence. Like DFlash, the depth-d
distribution depends only on the context, not on the tokens drafted at depths before d.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from k26ctl.errors import ConfigError
from k26ctl.lab.server.corpus import documents
from k26ctl.lab.server.tokenizer import ByteTokenizer
from k26ctl.lab.server.weights import CONFIG_FILE, verify_checksums, write_checksums

CORPUS_FILE = "corpus.txt"
DEFAULT_BLOCK_SIZE = 8


def write_draft_dir(
    directory: Path, block_size: int = DEFAULT_BLOCK_SIZE, max_order: int = 12, tools: bool = False
) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    config = {
        "architectures": ["K26LabNGramDrafter"],
        "model_type": "k26lab-ngram-dflash",
        "block_size": block_size,
        "max_order": max_order,
        "smoothing": 0.1,
    }
    (directory / CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n")
    (directory / CORPUS_FILE).write_text("".join(documents(tools=tools)))
    write_checksums(directory, [CONFIG_FILE, CORPUS_FILE])


class NGramDrafter:
    def __init__(
        self, corpus_ids: list[int], vocab_size: int, block_size: int, max_order: int, smoothing: float
    ):
        self.vocab_size = vocab_size
        self.block_size = block_size
        self.max_order = max_order
        self.smoothing = smoothing
        self.corpus = corpus_ids
        # one character per token lets str.find do the suffix search in C
        self._text = "".join(chr(0x100 + i) for i in corpus_ids)
        counts = torch.bincount(torch.tensor(corpus_ids), minlength=vocab_size).float() + 1.0
        self.unigram = counts / counts.sum()
        # lab-only: propose the least likely token instead (a wrong or untrained draft model)
        self.inverted = False

    @classmethod
    def load(cls, directory: Path, vocab_size: int) -> NGramDrafter:
        if not directory.is_dir():
            raise ConfigError(
                f"draft model path {directory} is not a directory", "pass --speculative-draft-model-path DIR"
            )
        verify_checksums(directory)
        config = json.loads((directory / CONFIG_FILE).read_text())
        ids = ByteTokenizer().encode((directory / CORPUS_FILE).read_text())
        return cls(
            ids, vocab_size, int(config["block_size"]), int(config["max_order"]), float(config["smoothing"])
        )

    def _occurrences(self, context: list[int], limit: int = 256) -> tuple[list[int], int]:
        """End positions of the longest context suffix found in the corpus, and its length."""
        for n in range(min(self.max_order, len(context)), 0, -1):
            pattern = "".join(chr(0x100 + i) for i in context[-n:])
            ends: list[int] = []
            start = self._text.find(pattern)
            while start != -1 and len(ends) < limit:
                ends.append(start + n - 1)
                start = self._text.find(pattern, start + 1)
            if ends:
                return ends, n
        return [], 0

    def draft(self, context: list[int], depth: int | None = None) -> torch.Tensor:
        """log q_d for d = 1..depth (default block_size - 1): a [depth, vocab] tensor."""
        depth = self.block_size - 1 if depth is None else depth
        ends, _ = self._occurrences(context)
        probs = torch.empty(depth, self.vocab_size)
        for d in range(1, depth + 1):
            following = [self.corpus[e + d] for e in ends if e + d < len(self.corpus)]
            if following:
                hist = torch.bincount(torch.tensor(following), minlength=self.vocab_size).float()
                probs[d - 1] = (1 - self.smoothing) * hist / hist.sum() + self.smoothing * self.unigram
            else:
                probs[d - 1] = self.unigram
        if self.inverted:
            probs = 1.0 / probs
            probs = probs / probs.sum(dim=-1, keepdim=True)
        return probs.log()
