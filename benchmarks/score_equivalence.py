"""Verdict oracle for speed work on the detectors: the working tree must score every text exactly as a
baseline revision does.

Usage: python benchmarks/score_equivalence.py [--baseline-rev REV] [-n 10000] [--cache DIR]

Texts: ../shared/corpus/dev.jsonl and dev2.jsonl, benchmarks/data/*.jsonl (with their prompt, kind and
finish_reason where given) and the -n synthetic 600-character texts of score_throughput.py. Each side runs
`score_text` in a child process with its own PYTHONPATH (the baseline is the package at --baseline-rev,
exported with `git archive`); the full verdict JSON (degenerate, kind, reasons, every finding with its
detector, score, threshold, span, excerpt and message) is compared text by text. Every difference is
printed; the exit code is 1 when there is any. The baseline's verdicts are cached per revision
(--cache) because the baseline never changes. The in-process CPU seconds per text of both sides are
printed too (time.process_time in the child, word lists loaded before the clock starts).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from detectors import CORPUS_FILES, default_corpus_dir  # noqa: E402
from score_throughput import export_revision, make_texts  # noqa: E402

# Run in the child: read requests (JSON list) from argv[1], write verdicts (JSON list) to argv[2].
CHILD = r"""
import json, sys, time
import k26ctl
from k26ctl.smoke.detectors import score_text
print(f"scoring with {k26ctl.__file__}", file=sys.stderr)
requests = json.load(open(sys.argv[1], encoding="utf-8"))
score_text("warm up the word lists: the cat sat on the mat and then it went home")
started = time.process_time()
out = [
    score_text(r["text"], r.get("prompt"), r.get("kind"), r.get("finish_reason")).to_json()
    for r in requests
]
cpu = time.process_time() - started
json.dump({"cpu": cpu, "verdicts": out}, open(sys.argv[2], "w", encoding="utf-8"))
"""


def collect_requests(synthetic: int) -> list[dict[str, str]]:
    files = [default_corpus_dir() / name for name in CORPUS_FILES]
    files += sorted((ROOT / "benchmarks" / "data").glob("*.jsonl"))
    requests: list[dict[str, str]] = []
    for path in files:
        for raw in path.read_text(encoding="utf-8").splitlines():
            if not raw.strip():
                continue
            record = json.loads(raw)
            if not isinstance(record.get("text"), str):
                continue
            request = {"source": f"{path.name}", "text": record["text"]}
            for key in ("prompt", "kind", "finish_reason"):
                if isinstance(record.get(key), str):
                    request[key] = record[key]
            requests.append(request)
    requests += [{"source": "synthetic", "text": t} for t in make_texts(synthetic)]
    return requests


def run_side(pythonpath: str, requests_file: Path, out_file: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": pythonpath}
    # `python -c` puts the working directory first on sys.path: run where no k26ctl package lies, or the
    # baseline side would import the working tree's package when started from the repository root.
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(requests_file), str(out_file)], env=env, cwd=requests_file.parent
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--baseline-rev", default="e016eae", help="git revision whose verdicts are right")
    parser.add_argument("-n", type=int, default=10_000, help="synthetic 600-character texts (default 10000)")
    parser.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "k26ctl-score-oracle"))
    args = parser.parse_args(argv)
    rev = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", args.baseline_rev], capture_output=True, text=True, check=True
    ).stdout.strip()
    requests = collect_requests(args.n)
    payload = json.dumps(requests, ensure_ascii=False)
    # "2:" leaves out verdicts cached before the children ran outside the repository root
    key = hashlib.sha256(("2:" + rev + payload).encode()).hexdigest()[:16]
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    cached = cache / f"baseline-{key}.json"
    with tempfile.TemporaryDirectory(prefix="k26ctl-oracle-") as tmp:
        requests_file = Path(tmp) / "requests.json"
        requests_file.write_text(payload, "utf-8")
        ours_file = Path(tmp) / "ours.json"
        children = [run_side(str(ROOT), requests_file, ours_file)]
        if not cached.exists():
            old = Path(tmp) / "baseline"
            old.mkdir()
            export_revision(rev, old)
            children.append(run_side(str(old), requests_file, Path(tmp) / "baseline.json"))
        if any(child.wait() != 0 for child in children):
            raise SystemExit("a scoring child failed")
        if not cached.exists():
            cached.write_text((Path(tmp) / "baseline.json").read_text("utf-8"), "utf-8")
        ours = json.loads(ours_file.read_text("utf-8"))
    base = json.loads(cached.read_text("utf-8"))
    differences = 0
    for i, (request, a, b) in enumerate(zip(requests, base["verdicts"], ours["verdicts"], strict=True)):
        if a != b:
            differences += 1
            print(f"DIFF #{i} ({request['source']}): {request['text'][:80]!r}")
            print(
                f"  baseline: degenerate={a['degenerate']} kind={a['kind']} "
                f"{[(f['detector'], f['score']) for f in a['findings']]}"
            )
            print(
                f"  ours:     degenerate={b['degenerate']} kind={b['kind']} "
                f"{[(f['detector'], f['score']) for f in b['findings']]}"
            )
            if [(f["detector"], f["score"]) for f in a["findings"]] == [
                (f["detector"], f["score"]) for f in b["findings"]
            ]:
                print("  (same detectors and scores; span, excerpt or message differ)")
    n = len(requests)
    print(
        f"{n} texts ({n - args.n} corpus/data, {args.n} synthetic), baseline {args.baseline_rev} ({rev[:10]})"
    )
    print(
        f"  in-process CPU per text: baseline {1000 * base['cpu'] / n:.2f} ms, "
        f"this tree {1000 * ours['cpu'] / n:.2f} ms (load average {os.getloadavg()[0]:.2f})"
    )
    print(f"  {differences} texts differ in verdict, detectors, scores, spans or messages")
    return 1 if differences else 0


if __name__ == "__main__":
    raise SystemExit(main())
