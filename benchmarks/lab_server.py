#!/usr/bin/env python3
"""Lab server figures: start-up time and generation speed, plain greedy vs DDTree.

    python3 benchmarks/lab_server.py [--rounds 3] [--tokens 128] [--json]

Measured:
- start-up: `python -m k26ctl.lab.serve` launched to "The server is fired up and ready to roll!" in its
  log and to the first /health 200 (includes `import torch`, loading and checking the checkpoint, the
  warm-up generation), for NONE and for DDTree budget 16 (median of --rounds).
- engine tokens/s (in process, one thread, greedy): plain decode vs DDTree budget 7 (unpatched tree),
  budget 16 on a patched tree copy, and budget 16 unpatched (the bug), batch 1 and 4, with the accept
  length (tokens per verify pass).
- HTTP tokens/s: sequential /generate calls of --tokens tokens against a live server, plain vs DDTree
  budget 7, and the e2e latency of one chat completion.
Loopback only. Uses up to two cores for a minute or so.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

PROMPTS = [
    "The lighthouse stood",
    "Bread is made from",
    "A river begins",
    "Bees live together",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(
    args: list[str], log: Path, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    child_env = {k: v for k, v in os.environ.items() if not k.startswith(("K26LAB_", "SGLANG_"))}
    child_env.pop("PYTHONPATH", None)
    child_env.update(env or {})
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "k26ctl.lab.serve", "--port", str(port), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=child_env,
        )
    return proc, port


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def startup_once(args: list[str], tmp: Path) -> dict[str, float]:
    import httpx

    log = tmp / f"startup-{time.monotonic_ns()}.log"
    t0 = time.monotonic()
    proc, port = start(args, log)
    ready = health = None
    try:
        while time.monotonic() - t0 < 120:
            if ready is None and "fired up and ready to roll" in log.read_text(errors="replace"):
                ready = time.monotonic() - t0
            if ready is not None:
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200:
                        health = time.monotonic() - t0
                        break
                except httpx.TransportError:
                    pass
            if proc.poll() is not None:
                raise RuntimeError(log.read_text()[-2000:])
            time.sleep(0.02)
    finally:
        stop(proc)
    assert ready is not None and health is not None, "server did not start"
    return {"ready_s": ready, "health_200_s": health}


def engine_figures(tokens: int) -> list[dict[str, Any]]:
    import torch

    from k26ctl.lab.server.drafter import NGramDrafter
    from k26ctl.lab.server.engine import Engine, SpecSettings
    from k26ctl.lab.server.tokenizer import ByteTokenizer
    from k26ctl.lab.server.tree_loader import BUNDLED_TREE, import_tree
    from k26ctl.lab.server.weights import DEFAULT_DRAFT_DIR, DEFAULT_MODEL_DIR, load_model
    from tests.support.lab_server import patched_tree

    torch.set_num_threads(1)
    tok = ByteTokenizer()
    model = load_model(DEFAULT_MODEL_DIR)
    drafter = NGramDrafter.load(DEFAULT_DRAFT_DIR, model.config.vocab_size)
    patched = patched_tree(Path(tempfile.mkdtemp(prefix="k26lab-bench-")))
    ids = [tok.encode(p) for p in PROMPTS]
    rows = []
    cases = [
        ("plain", SpecSettings("NONE"), BUNDLED_TREE),
        ("ddtree b7 unpatched", SpecSettings("DDTREE", 8, 7, 1), BUNDLED_TREE),
        ("ddtree b16 topk1 patched", SpecSettings("DDTREE", 8, 16, 1), patched),
        ("ddtree b16 topk6 patched", SpecSettings("DDTREE", 8, 16, 6), patched),
        ("ddtree b16 topk1 unpatched (bug)", SpecSettings("DDTREE", 8, 16, 1), BUNDLED_TREE),
    ]
    for name, spec, root in cases:
        tree = import_tree(root)
        tree.lab_memory.configure(unvisited="nan", scope="all")
        for bs in (1, 4):
            engine = Engine(model, tree, spec, drafter if spec.algorithm != "NONE" else None)
            engine.generate([ids[0]], 8)  # warm-up
            best = None
            for _ in range(3):
                t0 = time.perf_counter()
                reqs = engine.generate(ids[:bs], tokens)  # no stop tokens: exactly `tokens` each
                elapsed = time.perf_counter() - t0
                best = elapsed if best is None else min(best, elapsed)
            assert best is not None
            generated = sum(len(r.output_ids) for r in reqs)
            verify = sum(r.verify_ct for r in reqs)
            rows.append(
                {
                    "case": name,
                    "batch": bs,
                    "tokens": generated,
                    "tokens_per_s": round(generated / best, 1),
                    "ms_per_token_per_request": round(1000 * best / (generated / bs), 3),
                    "accept_length": round((generated - bs) / verify, 2) if verify else None,
                }
            )
    shutil.rmtree(patched, ignore_errors=True)
    return rows


def http_figures(tokens: int, tmp: Path) -> list[dict[str, Any]]:
    import httpx

    rows = []
    for name, args in (
        ("plain", []),
        ("ddtree b7", ["--speculative-algorithm", "DDTREE", "--speculative-ddtree-budget", "7"]),
    ):
        proc, port = start(
            args, tmp / f"http-{name.replace(' ', '-')}.log", env={"SGLANG_DDTREE_MAX_TOPK": "1"}
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                try:
                    if httpx.get(url + "/health", timeout=5).status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.1)
            total, t0 = 0, time.perf_counter()
            for _ in range(3):
                for prompt in PROMPTS:
                    body = httpx.post(
                        url + "/generate",
                        json={
                            "text": prompt,
                            "sampling_params": {"max_new_tokens": tokens, "ignore_eos": True},
                        },
                        timeout=60,
                    ).json()
                    total += body["meta_info"]["completion_tokens"]
            elapsed = time.perf_counter() - t0
            c0 = time.perf_counter()
            httpx.post(
                url + "/v1/chat/completions",
                json={
                    "messages": [{"role": "user", "content": "What is the capital of France?"}],
                    "max_tokens": 80,
                },
                timeout=60,
            ).raise_for_status()
            chat = time.perf_counter() - c0
            info = httpx.get(url + "/server_info", timeout=10).json()
            rows.append(
                {
                    "case": name,
                    "tokens_per_s": round(total / elapsed, 1),
                    "chat_80_tokens_s": round(chat, 3),
                    "avg_spec_accept_length": round(info["internal_states"][0]["avg_spec_accept_length"], 2),
                }
            )
        finally:
            stop(proc)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--json", action="store_true")
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="k26lab-bench-") as tmp_name:
        tmp = Path(tmp_name)
        startup = {}
        for name, args in (
            ("NONE", []),
            ("DDTREE b16", ["--speculative-algorithm", "DDTREE", "--speculative-ddtree-budget", "16"]),
        ):
            runs = [startup_once(args, tmp) for _ in range(opts.rounds)]
            startup[name] = {k: round(statistics.median(r[k] for r in runs), 3) for k in runs[0]}
        engine = engine_figures(opts.tokens)
        http = http_figures(opts.tokens, tmp)
    result = {"startup": startup, "engine": engine, "http": http}
    if opts.json:
        print(json.dumps(result, indent=2))
        return 0
    print("start-up (median):")
    for name, fig in startup.items():
        print(f"  {name:12s} ready {fig['ready_s']:.2f} s, first /health 200 {fig['health_200_s']:.2f} s")
    print(f"engine, greedy, {opts.tokens} tokens per request, one thread:")
    for row in engine:
        accept = "" if row["accept_length"] is None else f", accept length {row['accept_length']}"
        print(
            f"  {row['case']:34s} batch {row['batch']}: {row['tokens_per_s']:8.1f} tok/s, "
            f"{row['ms_per_token_per_request']:.3f} ms/token/request{accept}"
        )
    print("HTTP /generate, sequential:")
    for row in http:
        print(
            f"  {row['case']:10s} {row['tokens_per_s']:8.1f} tok/s, "
            f"80-token chat {row['chat_80_tokens_s']:.3f} s, "
            f"avg accept length {row['avg_spec_accept_length']}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
