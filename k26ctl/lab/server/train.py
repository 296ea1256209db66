"""Train the lab model and write the shipped checkpoint: `python -m k26ctl.lab.train`.

Bitwise reproducible: one thread, fixed seed, deterministic data order. The default run takes about
a minute and a half on one core. The drafter's n-gram corpus is written next to it. `--tools` adds
the tool-call chats and writes the k26lab-tiny-tools checkpoint (and its drafter) instead.
"""

from __future__ import annotations

import argparse
import math
import random
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from k26ctl.lab.server.corpus import documents
from k26ctl.lab.server.drafter import write_draft_dir
from k26ctl.lab.server.model import ModelConfig, TinyDecoder
from k26ctl.lab.server.tokenizer import ByteTokenizer
from k26ctl.lab.server.weights import (
    DEFAULT_DRAFT_DIR,
    DEFAULT_MODEL_DIR,
    TOOLS_DRAFT_DIR,
    TOOLS_MODEL_DIR,
    save_model,
    sha256_file,
)


def token_stream(seed: int, repeats: int, tools: bool = False) -> torch.Tensor:
    tok = ByteTokenizer()
    docs = documents(tools=tools)
    rng = random.Random(seed)
    ids: list[int] = []
    for _ in range(repeats):
        order = list(range(len(docs)))
        rng.shuffle(order)
        for i in order:
            ids.extend(tok.encode(docs[i]))
    return torch.tensor(ids, dtype=torch.long)


def train(
    steps: int, batch: int, seq_len: int, lr: float, seed: int, log_every: int = 50, tools: bool = False
) -> tuple[TinyDecoder, float]:
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    stream = token_stream(seed, repeats=20, tools=tools)
    model = TinyDecoder(ModelConfig())
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.98), weight_decay=0.01)
    gen = torch.Generator().manual_seed(seed)
    warmup = 30
    loss_value = float("nan")
    started = time.monotonic()
    for step in range(steps):
        scale = (
            (step + 1) / warmup
            if step < warmup
            else 0.5 * (1 + math.cos(math.pi * (step - warmup) / (steps - warmup)))
        )
        for group in opt.param_groups:
            group["lr"] = lr * max(scale, 0.05)
        starts = torch.randint(0, stream.numel() - seq_len - 1, (batch,), generator=gen)
        window = torch.stack([stream[s : s + seq_len + 1] for s in starts.tolist()])
        logits = model(window[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), window[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        loss_value = float(loss.detach())
        if step % log_every == 0 or step == steps - 1:
            print(f"step {step:5d} loss {loss_value:.4f} ({time.monotonic() - started:.1f} s)", flush=True)
    model.eval()
    return model, loss_value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m k26ctl.lab.train", description=__doc__)
    parser.add_argument("--steps", type=int, default=900)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seq-len", type=int, default=256)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--out", type=Path, default=DEFAULT_MODEL_DIR)
    parser.add_argument("--draft-out", type=Path, default=DEFAULT_DRAFT_DIR)
    parser.add_argument(
        "--tools",
        action="store_true",
        help="add the tool-call chats (data/tools.txt): the k26lab-tiny-tools checkpoint",
    )
    args = parser.parse_args(argv)
    if args.tools and args.out == DEFAULT_MODEL_DIR:
        args.out, args.draft_out = TOOLS_MODEL_DIR, TOOLS_DRAFT_DIR
    started = time.monotonic()
    model, loss = train(args.steps, args.batch, args.seq_len, args.lr, args.seed, tools=args.tools)
    elapsed = time.monotonic() - started
    save_model(model, args.out)
    write_draft_dir(args.draft_out, tools=args.tools)
    weights = args.out / "model.pt"
    print(
        f"trained {args.steps} steps in {elapsed:.1f} s, final loss {loss:.4f}; "
        f"{weights} {weights.stat().st_size} bytes sha256 {sha256_file(weights)}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
