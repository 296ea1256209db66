"""Calibration of the self-consistency probes' pass rule, their false-alarm rate, and their cost.

Usage: python benchmarks/probe_calibration.py [--runs 20] [--rate 0.25] [--gap 0.5]
                                              [--sweep 0.5:0.5 0.25:1.0] [--sweep-runs 5]
                                              [--broken-runs 2] [--json FILE]

Healthy part: the lab profiles none, ddtree-b7 and ddtree-b16-patched, each with the lab's near-tie
switch on (K26LAB_NEAR_TIE_RATE=RATE, K26LAB_NEAR_TIE_GAP=GAP: a greedy row whose top two logits are
within GAP takes its runner-up with probability RATE, drawn per batch shape, so answers and probes
disagree now and then as on a GPU). Every run starts a fresh
lab server with its own K26LAB_NEAR_TIE_SEED (independent draws) and runs the lab suite at the
profile's concurrency (2) with the probes on. Reported per configuration: runs passed, probe
mismatches per run, the largest count in one answer, and the overall share. `--sweep RATE:GAP ...`
repeats ddtree-b7 at higher settings to show where the rule's tolerance ends.

Broken part: every broken lab variant (unpatched budget 8, 12, 16 with NaN and stale unvisited rows,
mask-only scope, the subtle second-request fault), `--broken-runs` runs each, reporting the largest
per-answer count (the rule fails a run when one answer has more than 2).

Cost: probe wall time against the generation phase of the same run (SmokeReport.generation_seconds
and ProbeReport.elapsed), over all healthy runs.
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
from k26ctl.smoke.probes import PassRule  # noqa: E402
from tests.support.lab_server import lab_server  # noqa: E402

# findings that follow from the probe verdict itself (re-judged from the recorded counts)
_PROBE_DERIVED = {"self_consistency", "self_consistency_share", "nondeterministic"}


def passed_under(rule: PassRule, row: dict[str, Any]) -> bool:
    """The run's verdict under `rule`, from its recorded counts: every other check passed, and no
    answer nor the whole run crossed the rule. (A `nondeterministic` failure that was only caused by
    a probe verdict follows that verdict.)"""
    others = set(row["failing"]) - _PROBE_DERIVED
    return (
        not others
        and not rule.answer_fails(row["max_per_answer"])
        and not rule.share_fails(row["mismatches"], row["checked"])
    )


HEALTHY = LAB_HEALTHY
BROKEN = LAB_FAULTS


def one_run(profile: str, patched: bool, overrides: list[str], env: dict[str, str]) -> dict[str, Any]:
    suite = load_suite(suite_for(profile))
    # (a shared machine may take minutes to load the server: the launcher's default wait is 120 s)
    with lab_server(profile, patched=patched, env=env, overrides=overrides, ready_timeout=600) as server:
        report = run_smoke(SmokeTarget(server.url), suite, options=SmokeOptions(concurrency=2))
    probes = report.probes
    assert probes is not None and probes.supported, "the lab server serves token ids"
    per_answer = [len(a.mismatches) for a in probes.answers]
    return {
        "passed": report.passed,
        "probe_verdict": probes.verdict,
        "flushed": probes.flushed,
        "checked": probes.checked,
        "mismatches": len(probes.mismatches),
        "max_per_answer": max(per_answer, default=0),
        "first_position": probes.first_mismatch.position if probes.first_mismatch else None,
        "diverged_pairs": sum(f.detector == "nondeterministic" for r in report.results for f in r.findings),
        "failing": sorted({f.detector for r in report.results for f in r.failures}),
        "generation_s": report.generation_seconds,
        "probes_s": probes.elapsed,
    }


def healthy(
    rate: float, gap: float, runs: int, configs: list[tuple[str, bool]]
) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for profile, patched in configs:
        rows = []
        for seed in range(runs):
            env = {
                "K26LAB_NEAR_TIE_RATE": str(rate),
                "K26LAB_NEAR_TIE_GAP": str(gap),
                "K26LAB_NEAR_TIE_SEED": str(seed + 1),
            }
            rows.append(one_run(profile, patched, [], env))
            print(f"  {profile} rate {rate} seed {seed + 1}: {json.dumps(rows[-1])}", flush=True)
        out[profile] = rows
    return out


def probes_fail(rule: PassRule, row: dict[str, Any]) -> bool:
    return rule.answer_fails(row["max_per_answer"]) or rule.share_fails(row["mismatches"], row["checked"])


def summarise_healthy(
    label: str, setting: str, results: dict[str, list[dict[str, Any]]], rule: PassRule
) -> None:
    print(f"\n## {label}: near-tie {setting}")
    print(
        "| profile | runs passed | probes passed | mismatches/run (mean, max) | max in one answer "
        "| share max | diverged pairs/run | other failing checks |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for profile, rows in results.items():
        mism = [r["mismatches"] for r in rows]
        share = max(r["mismatches"] / r["checked"] for r in rows)
        print(
            f"| {profile} | {sum(passed_under(rule, r) for r in rows)}/{len(rows)} | "
            f"{sum(not probes_fail(rule, r) for r in rows)}/{len(rows)} | "
            f"{statistics.mean(mism):.2f}, {max(mism)} | {max(r['max_per_answer'] for r in rows)} | "
            f"{share:.2%} | "
            f"{statistics.mean(r['diverged_pairs'] for r in rows):.2f} | "
            f"{', '.join(sorted({d for r in rows for d in r['failing']} - _PROBE_DERIVED)) or 'none'} |"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument(
        "--profiles", nargs="*", default=[name for name, _ in HEALTHY], help="Healthy profiles to run."
    )
    parser.add_argument("--rate", type=float, default=0.25)
    parser.add_argument("--gap", type=float, default=0.5)
    parser.add_argument("--sweep", nargs="*", default=["0.5:0.5", "0.25:1.0"], metavar="RATE:GAP")
    parser.add_argument("--sweep-runs", type=int, default=5)
    parser.add_argument("--broken-runs", type=int, default=2)
    parser.add_argument("--json", type=Path, default=None, help="Also write every run's figures here.")
    parser.add_argument(
        "--summarise",
        type=Path,
        default=None,
        metavar="FILE",
        help="Only print the tables for a --json FILE.",
    )
    args = parser.parse_args(argv)
    if args.summarise is not None:
        summarise(json.loads(args.summarise.read_text()), PassRule())
        return 0

    setting = f"rate {args.rate} gap {args.gap}"
    record: dict[str, Any] = {"rate": args.rate, "gap": args.gap}
    print(f"# healthy, {args.runs} runs each at near-tie {setting}", flush=True)
    record["healthy"] = healthy(args.rate, args.gap, args.runs, [h for h in HEALTHY if h[0] in args.profiles])
    record["sweep"] = {}
    for pair in args.sweep:
        rate, gap = (float(x) for x in pair.split(":"))
        print(f"# sweep: ddtree-b7 at near-tie rate {rate} gap {gap}", flush=True)
        record["sweep"][f"rate {rate} gap {gap}"] = healthy(
            rate, gap, args.sweep_runs, [("ddtree-b7", False)]
        )
    record["broken"] = {}
    for label, (profile, overrides, env) in BROKEN.items():
        rows = [one_run(profile, False, overrides, env) for _ in range(args.broken_runs)]
        for row in rows:
            print(f"  {label}: {json.dumps(row)}", flush=True)
        record["broken"][label] = rows

    if args.json:
        args.json.write_text(json.dumps(record, indent=1))
    summarise(record, PassRule())
    return 0


def summarise(record: dict[str, Any], rule: PassRule) -> None:
    print(f"\n# Verdicts under the pass rule: {rule.describe()}")
    summarise_healthy(
        "No false alarms", f"rate {record['rate']} gap {record['gap']}", record["healthy"], rule
    )
    for label, results in record["sweep"].items():
        summarise_healthy("Tolerance sweep", label, results, rule)
    print("\n## Broken variants")
    print(
        "| variant | runs failed by the probes | max in one answer (min over runs) | first mismatch "
        "| other failing checks |"
    )
    print("|---|---|---|---|---|")
    for label, rows in record["broken"].items():
        if not rows:
            continue
        firsts = [r["first_position"] for r in rows if r["first_position"] is not None]
        others = sorted({d for r in rows for d in r["failing"]} - {"self_consistency", "nondeterministic"})
        print(
            f"| {label} | {sum(probes_fail(rule, r) for r in rows)}/{len(rows)} | "
            f"{min(r['max_per_answer'] for r in rows)} | {min(firsts) if firsts else '-'} | "
            f"{', '.join(others) or 'none'} |"
        )
    all_healthy = [r for rows in record["healthy"].values() for r in rows]
    if not all_healthy:
        return
    gen = sum(r["generation_s"] for r in all_healthy)
    probes = sum(r["probes_s"] for r in all_healthy)
    ratios = [r["probes_s"] / r["generation_s"] for r in all_healthy if r["generation_s"] > 0]
    print("\n## Cost (healthy runs)")
    print(
        f"probes {probes:.1f} s against generation {gen:.1f} s over {len(all_healthy)} runs: ratio "
        f"{probes / gen:.2f} (per run median {statistics.median(ratios):.2f}, max {max(ratios):.2f})"
    )


if __name__ == "__main__":
    raise SystemExit(main())
