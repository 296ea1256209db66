#!/usr/bin/env python3
"""`k26ctl sweep` against the exhaustive grid, on the real lab host (needs root).

1. The grid: every point of PARAMS on profiles/lab/sweep.yaml (unpatched DDTree budget 7, the GPU
   step-time model, an order-3 drafter), each deployed, smoke-gated and measured exactly as the
   sweep measures a point (the sweep's own runner; stored as a sweep session, so an interrupted run
   continues where it stopped).
2. The sweep over the same space from the profile's default, with its restart budget.
3. The sweep's winner against the default configuration (and against the grid's best, when that
   is another point), each redeployed and measured REPEATS times in turn, to show the gain against
   run-to-run noise and to compare winner and grid best under the same conditions.

Usage: sudo python3 benchmarks/sweep_grid.py [--name t-sweep] [--target 1] [--json OUT]
       [--grid-json SAVED]  (reuse the grid of an earlier run's result document: steps 2 and 3 only)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PARAMS = [
    "spec.ddtree.budget=[4, 5, 6, 7, 8, 10, 12, 16, 20, 24]",
    "spec.ddtree.max_topk=1,4",
    "patches=[[], [triton-ddtree-verify-width]]",
]
PROFILE = ROOT / "profiles" / "lab" / "sweep.yaml"
SUITE = ROOT / "benchmarks" / "data" / "sweep-smoke-suite.yaml"


def build(args: argparse.Namespace) -> Any:
    from k26ctl.sweep import api
    from k26ctl.sweep.space import parse_param

    return api.build_spec(
        str(PROFILE),
        [parse_param(p) for p in PARAMS],
        concurrency=[int(c) for c in args.concurrency.split(",")],
        target=args.target,
        sets=[f"host.lab={args.name}", f"smoke.suite={SUITE}", *args.set],
        max_restarts=args.max_restarts,
        requests_per_level=args.requests,
        max_new_tokens=args.max_tokens,
    )


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def run_grid(args: argparse.Namespace, state: Path) -> list[Any]:
    from k26ctl.sweep import api
    from k26ctl.sweep.space import grid, point_id
    from k26ctl.sweep.state import SweepSession, by_id

    spec = build(args)
    spec.controls = False
    session = SweepSession("bench-grid", state)
    if not session.exists():
        session.create(spec)
    prepared = api.prepare(spec)
    runner = api._runner(prepared, api.Context(session="bench-grid", yes=True, state_directory=state))
    points = session.points()
    known = by_id(points)
    todo = [p for p in grid(spec.param_list()) if point_id(p) not in known]
    log(f"grid: {len(grid(spec.param_list()))} points, {len(todo)} to measure")
    for assignment in todo:
        number = max((p.number for p in points), default=0) + 1
        session.record_start(number, assignment, "grid")
        record = runner.run(number, assignment, "grid", " ".join(f"{k}={v}" for k, v in assignment.items()))
        session.record_point(record)
        points.append(record)
        level = record.level(args.target)
        tps = f"{level.output_tokens_per_s:.1f} tok/s" if level and record.coherent else "incoherent"
        log(f"  grid {number}: {record.label} -> {tps} ({record.seconds:.0f} s)")
    return points


def saved_grid(path: Path, target: int) -> list[Any]:
    """The grid points of an earlier run's result document (its `grid_points`), as point records."""
    from k26ctl.sweep.load import LevelResult
    from k26ctl.sweep.state import PointRecord

    doc = json.loads(path.read_text())
    if int(doc.get("target_concurrency", target)) != target:
        raise SystemExit(f"{path}: the saved grid's target is c{doc['target_concurrency']}, not c{target}")
    return [
        PointRecord(
            number=i + 1,
            assignment=dict(p["assignment"]),
            role="grid",
            label="saved",
            up=bool(p["coherent"]),
            coherent=bool(p["coherent"]),
            restarted=True,
            seconds=0.0,
            detail=f"from {path.name}",
            levels=[LevelResult.from_json(lv) for lv in p["levels"]],
        )
        for i, p in enumerate(doc["grid_points"])
    ]


def run_sweep(args: argparse.Namespace, state: Path) -> Any:
    from k26ctl.cli.present.sweep import SweepProgress
    from k26ctl.sweep import api
    from k26ctl.sweep.state import SweepSession

    progress = SweepProgress()
    ctx = api.Context(session="bench-sweep", yes=True, state_directory=state, reporter=progress, note=log)
    if SweepSession("bench-sweep", state).exists():
        return api.resume(ctx)
    return api.start(build(args), ctx)


def repeats(args: argparse.Namespace, contenders: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Deploy each contender in turn (a restart each), round after round, and measure the target
    level: readings of one configuration taken minutes apart differ by several per cent on a shared
    machine, so only readings taken side by side compare two configurations."""
    from k26ctl.search.assignment import with_assignment
    from k26ctl.search.step import HostDeployer
    from k26ctl.sweep import api
    from k26ctl.sweep.load import LoadSpec, measure

    prepared = api.prepare(build(args))
    deployer = HostDeployer(smoke_in_deploy=False)
    load = LoadSpec(prepared.load.prompts, [args.target], args.requests, args.max_tokens)
    runs: dict[str, list[float]] = {name: [] for name in contenders}
    for round_number in range(args.repeats):
        for name, assignment in contenders.items():
            loaded = with_assignment(prepared.base, assignment)
            deployed = deployer.deploy(loaded)
            if not deployed.up:
                raise SystemExit(f"repeat {round_number + 1}: {name} did not come up: {deployed.detail}")
            with deployer.server_url(loaded) as url:
                assert url is not None
                (level,) = measure(url, load)
            runs[name].append(level.output_tokens_per_s)
            log(f"  repeat {round_number + 1} {name}: {level.output_tokens_per_s:.1f} tok/s")
    summary: dict[str, Any] = {"runs": runs, "assignments": contenders}
    for name, values in runs.items():
        summary[name] = {
            "mean": statistics.fmean(values),
            "stdev": statistics.stdev(values) if len(values) > 1 else 0.0,
        }
    summary["gain"] = summary["winner"]["mean"] / summary["default"]["mean"] - 1.0
    summary["separated"] = min(runs["winner"]) > max(runs["default"])
    if "grid_best" in runs:
        summary["winner_to_grid_best"] = summary["winner"]["mean"] / summary["grid_best"]["mean"]
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--name", default="t-sweep", help="lab host name (brought up if needed)")
    parser.add_argument("--target", type=int, default=1)
    parser.add_argument("--concurrency", default="1,4")
    parser.add_argument("--requests", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--max-restarts", type=int, default=12)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="profile override")
    parser.add_argument("--state", default=None, help="state directory (default: a new temporary one)")
    parser.add_argument("--json", dest="out", default=None, help="write the result document here")
    parser.add_argument(
        "--grid-json",
        default=None,
        metavar="SAVED",
        help="reuse the grid of an earlier run's result document instead of measuring it again",
    )
    args = parser.parse_args()

    from k26ctl.lab.host import lab_up
    from k26ctl.sweep.space import point_id

    lab_up(args.name)
    state = Path(args.state or tempfile.mkdtemp(prefix="k26-sweep-bench-"))
    state.mkdir(parents=True, exist_ok=True)
    log(f"state in {state}")
    started = time.monotonic()
    grid_points = saved_grid(Path(args.grid_json), args.target) if args.grid_json else run_grid(args, state)
    grid_seconds = time.monotonic() - started
    coherent = [p for p in grid_points if p.coherent and p.level(args.target)]
    grid_best = max(coherent, key=lambda p: p.level(args.target).output_tokens_per_s)
    started = time.monotonic()
    result = run_sweep(args, state)
    sweep_seconds = time.monotonic() - started
    doc = result.to_json()
    best = result.best
    assert best is not None, "the sweep found no coherent point"
    grid_by_id = {point_id(p.assignment): p for p in grid_points}
    reported_incoherent = [p for p in result.points if p.number == best.number and not p.coherent]
    grid_view = grid_by_id.get(point_id(best.assignment))
    default = next(p for p in result.points if p.role == "default")
    grid_best_tps = grid_best.level(args.target).output_tokens_per_s
    report: dict[str, Any] = {
        "target_concurrency": args.target,
        "grid": {
            "saved_from": args.grid_json,
            "points": len(grid_points),
            "coherent": len(coherent),
            "seconds": round(grid_seconds, 1),
            "best": {"assignment": grid_best.assignment, "output_tokens_per_s": grid_best_tps},
        },
        "sweep": {
            "restarts": result.restarts,
            "points": len(result.points),
            "seconds": round(sweep_seconds, 1),
            "best": doc["best"],
            "best_coherent_in_grid": grid_view.coherent if grid_view else None,
            "ratio_to_grid_best": result.score(best) / grid_best_tps,
            "incoherent_reported": bool(reported_incoherent),
        },
        "grid_points": [
            {
                "assignment": p.assignment,
                "coherent": p.coherent,
                "levels": [lv.to_json() for lv in p.levels],
            }
            for p in grid_points
        ],
        "sweep_document": doc,
    }
    if args.repeats > 0 and point_id(best.assignment) != point_id(default.assignment):
        contenders = {"default": default.assignment, "winner": best.assignment}
        if point_id(best.assignment) != point_id(grid_best.assignment):
            contenders["grid_best"] = grid_best.assignment
        report["repeats"] = repeats(args, contenders)
    text = json.dumps(report, indent=2, default=str)
    if args.out:
        Path(args.out).write_text(text + "\n")
    sweep = report["sweep"]
    print(
        f"grid: {len(grid_points)} points ({len(coherent)} coherent) in {grid_seconds:.0f} s; best "
        f"{grid_best.assignment} {grid_best_tps:.1f} tok/s at c{args.target}\n"
        f"sweep: {result.restarts} restarts in {sweep_seconds:.0f} s; best {best.assignment} "
        f"{result.score(best):.1f} tok/s = {100 * sweep['ratio_to_grid_best']:.1f} % of the grid best; "
        f"incoherent reported: {sweep['incoherent_reported']}"
    )
    if "repeats" in report:
        r = report["repeats"]
        print(
            f"winner vs default over {args.repeats} alternating redeploys: "
            f"{r['winner']['mean']:.1f} +- {r['winner']['stdev']:.1f} vs "
            f"{r['default']['mean']:.1f} +- {r['default']['stdev']:.1f} tok/s, "
            f"gain {100 * r['gain']:+.1f} %, "
            f"every winner run above every default run: {r['separated']}"
        )
        if "winner_to_grid_best" in r:
            print(
                f"winner vs the grid's best side by side: {r['grid_best']['mean']:.1f} +- "
                f"{r['grid_best']['stdev']:.1f} tok/s for the grid best, winner at "
                f"{100 * r['winner_to_grid_best']:.1f} % of it"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
