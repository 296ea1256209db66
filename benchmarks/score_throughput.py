"""Throughput of `k26ctl score` over many texts of about 600 characters.

Usage: python benchmarks/score_throughput.py [-n 10000] [--baseline-rev REV] [--baseline-n 2000]
                                             [--workers N]

The texts are windows of 600 characters over the real outputs of ../shared/corpus/dev.jsonl and
dev2.jsonl (several corpus texts joined where one is shorter, a different window per text), so no two
texts are alike and nothing can be answered from a cache. The CLI runs as a child process
(`python -m k26ctl score FILE`), reading a JSON Lines file; the script reports wall time, texts per
second and the CPU seconds of the child and its workers.

Baseline measured in the same run: the same command with the package as it was at git revision
--baseline-rev (exported with `git archive` into a temporary directory and put first on PYTHONPATH),
over the first --baseline-n texts of the same file (the old code is slow). Goal: >= 1,000 texts/s on
the 2-core machine. Wall time grows with whatever else runs on the machine: the CPU seconds per text
are the steadier figure, and the load average is printed beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from detectors import CORPUS_FILES, default_corpus_dir  # noqa: E402

TEXT_CHARS = 600
GOAL_TEXTS_PER_SECOND = 1000.0


def make_texts(count: int) -> list[str]:
    corpus = default_corpus_dir()
    originals = [
        json.loads(line)["text"]
        for name in CORPUS_FILES
        for line in (corpus / name).read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    n = len(originals)
    texts: list[str] = []
    for i in range(count):
        k, step, offset = i % n, i // n + 1, (i // n) * 37
        joined = ""
        while len(joined) < offset + TEXT_CHARS:
            joined += originals[k % n] + "\n\n"
            k += step
        offset %= max(1, len(joined) - TEXT_CHARS)
        texts.append(joined[offset : offset + TEXT_CHARS])
    return texts


def run_score(path: Path, pythonpath: str, workers: int | None) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds of the child and its workers, exit code) of one `k26ctl score`."""
    env = {**os.environ, "PYTHONPATH": pythonpath}
    if workers is not None:
        env["K26CTL_SCORE_WORKERS"] = str(workers)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    # `python -m` puts the working directory first on sys.path: run where no k26ctl package lies, or the
    # baseline would import the working tree's package when started from the repository root.
    done = subprocess.run(
        [sys.executable, "-m", "k26ctl", "score", str(path)],
        env=env,
        cwd=path.parent,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=3600,
        check=False,
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode not in (0, 1):
        raise SystemExit(f"k26ctl score failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return wall, cpu, done.returncode


def export_revision(rev: str, into: Path) -> None:
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "k26ctl"], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)


def line(name: str, count: int, wall: float, cpu: float) -> str:
    return (
        f"  {name:<28} {count:>6} texts  {wall:7.2f} s wall  {count / wall:7.0f} texts/s  "
        f"{1000 * cpu / count:6.2f} ms CPU per text"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("-n", type=int, default=10_000, help="texts to score (default 10000)")
    parser.add_argument("--baseline-rev", default="", help="git revision whose detectors are the baseline")
    parser.add_argument("--baseline-n", type=int, default=2000, help="texts the baseline scores")
    parser.add_argument("--workers", type=int, default=None, help="scoring processes (default: all CPUs)")
    args = parser.parse_args(argv)
    texts = make_texts(args.n)
    print(
        f"{len(texts)} texts of {TEXT_CHARS} characters ({len(set(texts))} distinct), "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}"
    )
    with tempfile.TemporaryDirectory(prefix="k26ctl-score-bench-") as tmp:
        data = Path(tmp) / "texts.jsonl"
        data.write_text("".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts), "utf-8")
        wall, cpu, _ = run_score(data, str(ROOT), args.workers)
        print(line("k26ctl score (this tree)", len(texts), wall, cpu))
        ours_rate = len(texts) / wall
        if args.baseline_rev:
            old = Path(tmp) / "baseline"
            old.mkdir()
            export_revision(args.baseline_rev, old)
            subset = Path(tmp) / "subset.jsonl"
            subset.write_text(
                "".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts[: args.baseline_n]),
                "utf-8",
            )
            b_wall, b_cpu, _ = run_score(subset, str(old), None)
            print(line(f"k26ctl score @ {args.baseline_rev[:10]}", args.baseline_n, b_wall, b_cpu))
            rate_ratio = ours_rate / (args.baseline_n / b_wall)
            cpu_ratio = (b_cpu / args.baseline_n) / (cpu / len(texts))
            print(f"  speed-up: {rate_ratio:.1f}x texts/s, {cpu_ratio:.1f}x less CPU per text")
    verdict = "meets" if ours_rate >= GOAL_TEXTS_PER_SECOND else "misses"
    print(
        f"  {ours_rate:.0f} texts/s {verdict} the goal of {GOAL_TEXTS_PER_SECOND:.0f} texts/s (load "
        f"average now {os.getloadavg()[0]:.2f})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
