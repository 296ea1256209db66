"""Calibration of the rescoring probes (sampled answers) at one temperature, and their cost.

Usage: python benchmarks/rescore_calibration.py [--temperature 0.7] [--runs 20] [--broken-runs 3]
                                                [--relaxed 0.9 0.5 ... 0.001 0] [--json FILE]

Every run starts a fresh lab server and runs the lab suite with its sampled temperature replaced by
--temperature, at concurrency 2, with a seed of its own (the lab draws from the request's seed, as
SGLang does under deterministic inference; a fresh seed per run makes the runs independent). Only the
rescoring verdict is counted here (the text detectors and greedy probes have their own calibrations).

Healthy: none, ddtree-b7, ddtree-b16-patched (--runs each). Broken: every lab fault variant of
benchmarks/_lab_faults.py (--broken-runs each). Relaxed: ddtree-b7 with
--speculative-accept-threshold-acc A (and -single A), for each A of --relaxed: from which relaxation
the rescoring catches a lossy server.
Cost: rescoring wall time per sampled answer, the paired redraws' per drawn answer, and both against
the suite's generation phase of the same runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._lab_faults import FAULTS as LAB_FAULTS  # noqa: E402
from benchmarks._lab_faults import HEALTHY as LAB_HEALTHY  # noqa: E402
from benchmarks._lab_faults import suite_for  # noqa: E402
from k26ctl.smoke import SmokeOptions, SmokeTarget, load_suite, run_smoke  # noqa: E402
from k26ctl.smoke.rescoring import RescoreRule  # noqa: E402
from tests.support.lab_server import lab_server  # noqa: E402

HEALTHY = LAB_HEALTHY
BROKEN = LAB_FAULTS


def one_run(
    profile: str, patched: bool, overrides: list[str], env: dict[str, str], temperature: float, seed: int
) -> dict[str, Any]:
    base = load_suite(suite_for(profile))
    suite = base.model_copy(update={"temperatures": [0.0, temperature], "seed": seed})
    with lab_server(profile, patched=patched, env=env, overrides=overrides, ready_timeout=600) as server:
        # the lab's DDTree serves log-probabilities, so it is asked (rescoring=True)
        report = run_smoke(
            SmokeTarget(server.url), suite, options=SmokeOptions(concurrency=2, rescoring=True)
        )
    rescoring = report.rescoring
    assert rescoring is not None and rescoring.supported, "the lab server returns log-probabilities"
    return {
        "rescoring": rescoring.verdict,
        "tokens": rescoring.tokens,
        "answers": len(rescoring.answers),
        "low_tokens": rescoring.low_tokens,
        "low_expected": rescoring.low_expected,
        "low_tail": rescoring.low_tail,
        "surprise_z": rescoring.surprise_z,
        "min_answer_z": min((a.z for a in rescoring.answers), default=0.0),
        "surprise_run_tail": rescoring.surprise_run_tail,
        "surprise_answer_tail": rescoring.surprise_answer_tail,
        "diff_tokens": sum(a.diff_tokens for a in rescoring.answers),
        "max_diff": max((a.max_diff for a in rescoring.answers), default=0.0),
        "diff_failures": len(rescoring.diff_failures()),
        "departures": rescoring.departures,
        "departures_expected": rescoring.departures_expected,
        "departure_tail": rescoring.departure_tail,
        "redrawn": rescoring.redrawn,
        "redraw_s": rescoring.redraw_seconds,
        "rescore_s": rescoring.elapsed,
        "generation_s": report.generation_seconds,
        "smoke_passed": report.passed,
        "lossy": report.lossy_levers,
    }


RULE = RescoreRule()


def evidence(row: dict[str, Any], rule: RescoreRule) -> list[str]:
    """What fails the run under `rule`, from its recorded figures (so a rule can be re-judged offline)."""
    parts = []
    if row["diff_failures"]:
        parts.append("decode/rescore")
    if row["low_tail"] < rule.alpha:
        parts.append("unlikely tokens")
    per_answer = rule.alpha / max(1, row["answers"])
    if row["surprise_answer_tail"] < per_answer or row["surprise_run_tail"] < rule.alpha:
        parts.append("surprise")
    if row.get("departure_tail", 1.0) < rule.alpha:
        parts.append("departures")
    return parts


def table(title: str, results: dict[str, list[dict[str, Any]]], want: str, rule: RescoreRule) -> None:
    print(f"\n## {title}")
    print(
        f"| configuration | runs {want} | unlikely tokens/run (max) | expected (mean) | run z (min) "
        "| lowest answer z (min) | surprise P run / answer (min) | decode-rescore diff max (nats) "
        "| departures/run (max) | expected (mean) "
        "| departure P (min) | evidence |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for label, rows in results.items():
        hit = sum(bool(evidence(r, rule)) == (want == "failed") for r in rows)
        print(
            f"| {label} | {hit}/{len(rows)} | {max(r['low_tokens'] for r in rows)} | "
            f"{statistics.mean(r['low_expected'] for r in rows):.3f} | "
            f"{min(r['surprise_z'] for r in rows):.1f} | {min(r['min_answer_z'] for r in rows):.1f} | "
            f"{min(r['surprise_run_tail'] for r in rows):.2g} / "
            f"{min(r['surprise_answer_tail'] for r in rows):.2g} | "
            f"{max(r['max_diff'] for r in rows):.3f} | {max(r.get('departures', 0) for r in rows)} | "
            f"{statistics.mean(r.get('departures_expected', 0.0) for r in rows):.2f} | "
            f"{min(r.get('departure_tail', 1.0) for r in rows):.2g} | "
            f"{'; '.join(sorted({', '.join(evidence(r, rule)) or '-' for r in rows}))} |"
        )


def _save(path: Path | None, record: dict[str, Any]) -> None:
    """Written after every run, so a long calibration keeps what it measured if it is stopped."""
    if path is not None:
        path.write_text(json.dumps(record, indent=1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--broken-runs", type=int, default=3)
    parser.add_argument(
        "--relaxed", nargs="*", type=float, default=[0.9, 0.5, 0.3, 0.1, 0.03, 0.01, 0.001, 0.0]
    )
    parser.add_argument("--relaxed-runs", type=int, default=3)
    parser.add_argument(
        "--first-seed", type=int, default=0, help="Seeds start at 1000, 2000, 3000 plus this (fresh runs)."
    )
    parser.add_argument("--only", choices=["healthy", "broken", "relaxed"], default=None)
    parser.add_argument(
        "--configs",
        nargs="*",
        default=None,
        help="Only these healthy profiles and fault labels (all by default).",
    )
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--summarise", type=Path, default=None, metavar="FILE", help="Only print the tables.")
    parser.add_argument("--alpha", type=float, default=RULE.alpha, help="Re-judge --summarise with this.")
    args = parser.parse_args(argv)
    if args.summarise is not None:
        rule = RescoreRule(alpha=args.alpha)
        summarise(json.loads(args.summarise.read_text()), rule)
        return 0
    t = args.temperature
    record: dict[str, Any] = {"temperature": t, "healthy": {}, "broken": {}, "relaxed": {}}
    if args.only in (None, "healthy"):
        for profile, patched in HEALTHY:
            if args.configs is not None and profile not in args.configs:
                continue
            rows = []
            for seed in range(args.runs):
                rows.append(one_run(profile, patched, [], {}, t, 1000 + args.first_seed + seed))
                print(
                    f"  healthy {profile} seed {1000 + args.first_seed + seed}: {json.dumps(rows[-1])}",
                    flush=True,
                )
                record["healthy"][profile] = rows
                _save(args.json, record)
    if args.only in (None, "broken"):
        for label, (profile, overrides, env) in BROKEN.items():
            if args.configs is not None and label not in args.configs:
                continue
            rows = []
            for seed in range(args.broken_runs):
                rows.append(one_run(profile, False, overrides, env, t, 2000 + args.first_seed + seed))
                print(
                    f"  broken {label} seed {2000 + args.first_seed + seed}: {json.dumps(rows[-1])}",
                    flush=True,
                )
                record["broken"][label] = rows
                _save(args.json, record)
    if args.only in (None, "relaxed"):
        for value in args.relaxed:
            flags = [
                "sglang.extra_args=['--speculative-accept-threshold-single', "
                f"'{value}', '--speculative-accept-threshold-acc', '{value}']"
            ]
            rows = []
            for seed in range(args.relaxed_runs):
                rows.append(one_run("ddtree-b7", False, flags, {}, t, 3000 + args.first_seed + seed))
                print(
                    f"  relaxed {value} seed {3000 + args.first_seed + seed}: {json.dumps(rows[-1])}",
                    flush=True,
                )
                record["relaxed"][f"thresholds {value:g}"] = rows
                _save(args.json, record)
    _save(args.json, record)
    summarise(record)
    return 0


def summarise(record: dict[str, Any], rule: RescoreRule = RULE) -> None:
    t = record["temperature"]
    print(f"\n# Verdicts under the rule: {rule.describe()}")
    if record["healthy"]:
        table(f"Healthy lab servers, temperature {t:g}", record["healthy"], "passed", rule)
    if record["broken"]:
        table(f"Lab faults, temperature {t:g}", record["broken"], "failed", rule)
    if record["relaxed"]:
        table(
            f"ddtree-b7 with relaxed accept thresholds (single = acc), temperature {t:g}",
            record["relaxed"],
            "failed",
            rule,
        )
    rows = [r for group in record.values() if isinstance(group, dict) for rs in group.values() for r in rs]
    if rows:
        answers = max(1, sum(r["answers"] for r in rows))
        per_answer = sum(r["rescore_s"] for r in rows) / answers
        redraw = sum(r.get("redraw_s", 0.0) for r in rows)
        redrawn = sum(r.get("redrawn", 0) for r in rows)
        ratio = sum(r["rescore_s"] + r.get("redraw_s", 0.0) for r in rows) / max(
            1e-9, sum(r["generation_s"] for r in rows)
        )
        tokens = sum(r["tokens"] for r in rows) / answers
        print(
            f"\n## Cost\nrescoring {per_answer * 1000:.0f} ms per sampled answer ({tokens:.0f} tokens on "
            f"average, one prefill request each, flush included) over {len(rows)} runs; the paired "
            f"redraws {redraw / max(1, redrawn) * 1000:.0f} ms per drawn answer ({redrawn} drawn); "
            f"redraws and rescoring together {ratio:.2f}x the suite's generation phase in the same runs"
        )


if __name__ == "__main__":
    raise SystemExit(main())
