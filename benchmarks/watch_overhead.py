"""What the watcher's canary costs a serving lab server, as a share of its token throughput.

On one lab server (default: DDTree budget 7 with the modelled GPU step time, K26LAB_STEP_COST=gpu, so
a batch costs what it would on a GPU rather than what two CPU cores make of it):
1. capacity: CONCURRENCY greedy /generate requests of MAX_NEW tokens kept in flight for LOAD_S seconds
   (bounded: at most LOAD_REQUESTS requests); generated tokens per second from the server's own
   /metrics counters (sglang:generation_tokens_total), and prompt tokens the same way;
2. the canary: CYCLES default watcher cycles on the idle server; per cycle the server's counter deltas
   (generated tokens; prompt tokens sent, and computed: less sglang:cached_tokens_total, the probes'
   prefixes come mostly from the prefix cache), the HTTP requests the watcher reports, the cycle's time.
Share at the default 60 s interval = canary tokens per cycle / (capacity tokens per second x 60).

    python3 benchmarks/watch_overhead.py
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from k26ctl.smoke.suite import load_suite  # noqa: E402
from k26ctl.watch.canary import CanarySettings  # noqa: E402
from k26ctl.watch.loop import WatchConfig, Watcher  # noqa: E402
from k26ctl.watch.setup import url_target  # noqa: E402
from k26ctl.watch.store import WatchStore  # noqa: E402
from tests.support.lab_server import lab_server  # noqa: E402

INTERVAL = 60.0


def counters(url: str) -> dict[str, float]:
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(url + "/metrics", timeout=30, trust_env=False).text
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in (
                "sglang:generation_tokens_total",
                "sglang:prompt_tokens_total",
                "sglang:cached_tokens_total",
            ):
                out[sample.name] = out.get(sample.name, 0.0) + sample.value
    return out


def capacity(url: str, concurrency: int, max_new: int, seconds: float, limit: int) -> dict[str, float]:
    prompts = [p.prompt or "" for p in load_suite("lab").prompts if p.prompt]
    stop = time.monotonic() + seconds
    sent = [0]
    lock = threading.Lock()

    def worker(index: int) -> None:
        with httpx.Client(timeout=300, trust_env=False) as client:
            while time.monotonic() < stop:
                with lock:
                    if sent[0] >= limit:
                        return
                    sent[0] += 1
                    n = sent[0]
                text = prompts[(index + n) % len(prompts)]
                body = {"text": text, "sampling_params": {"temperature": 0, "max_new_tokens": max_new}}
                client.post(url + "/generate", json=body)

    before, started = counters(url), time.monotonic()
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed, after = time.monotonic() - started, counters(url)
    gen = after["sglang:generation_tokens_total"] - before["sglang:generation_tokens_total"]
    return {
        "seconds": elapsed,
        "requests": sent[0],
        "gen_tok_s": gen / elapsed,
        "computed_prompt_tok_s": computed(before, after) / elapsed,
    }


def computed(before: dict[str, float], after: dict[str, float]) -> float:
    """Prompt tokens the server computed between two readings (the prefix cache's share taken out)."""
    prompt = after["sglang:prompt_tokens_total"] - before["sglang:prompt_tokens_total"]
    cached = after.get("sglang:cached_tokens_total", 0.0) - before.get("sglang:cached_tokens_total", 0.0)
    return prompt - cached


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--profile", default="ddtree-b7")
    parser.add_argument("--step-cost", default="gpu", help="K26LAB_STEP_COST ('' for the raw CPU speed)")
    parser.add_argument("--concurrency", type=int, default=48, help="in flight (the lab's max running)")
    parser.add_argument("--max-new", type=int, default=256)
    parser.add_argument("--load-s", type=float, default=40.0)
    parser.add_argument("--load-requests", type=int, default=400)
    parser.add_argument("--cycles", type=int, default=10)
    args = parser.parse_args(argv)
    env = {"K26LAB_STEP_COST": args.step_cost} if args.step_cost else {}
    canary = CanarySettings()
    with lab_server(args.profile, env=env) as server, tempfile.TemporaryDirectory() as tmp:
        cap = capacity(server.url, args.concurrency, args.max_new, args.load_s, args.load_requests)
        print("capacity:", json.dumps({k: round(v, 2) for k, v in cap.items()}), flush=True)
        target = url_target(server.url, None, "lab", None, canary)
        watcher = Watcher(
            target.open, target.suite, WatchConfig(interval=0.0, canary=canary), WatchStore(Path(tmp))
        )
        rows = []
        for _ in range(args.cycles):
            before = counters(server.url)
            record = watcher.step().record
            after = counters(server.url)
            rows.append({
                "state": record["state"],
                "requests": record["requests"],
                "cycle_s": record["cycle_s"],
                "gen": after["sglang:generation_tokens_total"] - before["sglang:generation_tokens_total"],
                "prompt": after["sglang:prompt_tokens_total"] - before["sglang:prompt_tokens_total"],
                "computed_prompt": computed(before, after),
                "watcher_tokens": record["generated_tokens"],
            })  # fmt: skip
            print("cycle:", json.dumps(rows[-1]), flush=True)
    gen = statistics.mean(r["gen"] for r in rows)
    prompt = statistics.mean(r["prompt"] for r in rows)
    computed_prompt = statistics.mean(r["computed_prompt"] for r in rows)
    cycle_s = statistics.median(r["cycle_s"] for r in rows)
    gen_share = gen / (cap["gen_tok_s"] * INTERVAL)
    all_share = (gen + computed_prompt) / ((cap["gen_tok_s"] + cap["computed_prompt_tok_s"]) * INTERVAL)
    print(
        f"\nprofile {args.profile}, K26LAB_STEP_COST={args.step_cost or '(none)'}, "
        f"load {args.concurrency} in flight"
    )
    print("| figure | value |\n|---|---|")
    print(f"| server capacity, generated tokens/s | {cap['gen_tok_s']:.1f} |")
    print(f"| server capacity, computed prompt tokens/s | {cap['computed_prompt_tok_s']:.1f} |")
    print(f"| canary per cycle: HTTP requests | {statistics.mean(r['requests'] for r in rows):.1f} |")
    print(f"| canary per cycle: generated tokens (server counter) | {gen:.0f} |")
    print(f"| canary per cycle: prompt tokens sent (server counter) | {prompt:.0f} |")
    print(f"| canary per cycle: prompt tokens computed (less cached_tokens_total) | {computed_prompt:.0f} |")
    print(f"| canary cycle time (median, idle server) | {cycle_s:.2f} s |")
    print(f"| share of generated-token throughput at {INTERVAL:g} s | {gen_share:.3%} |")
    print(f"| share of all computed tokens (generated + prompt) at {INTERVAL:g} s | {all_share:.3%} |")
    print(f"| canary latency / interval (the server batches others meanwhile) | {cycle_s / INTERVAL:.3%} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
