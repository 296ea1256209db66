"""Wall time of the smoke suites against the real lab server, and how it scales with concurrency.

Usage: python benchmarks/smoke_walltime.py [--profiles none ddtree-b16-patched] [--suites lab default]
                                           [--concurrency 2 4 8] [--repeats 2]

For each lab profile a lab server is started on 127.0.0.1 (argv rendered from profiles/lab/*.yaml, the
patched profile over a patched copy of the lab tree), then each suite runs at each concurrency. Reported:
wall seconds (best and median of the repeats), requests, the sum of per-request latencies (what one
request at a time would cost, roughly), and the mean tokens/s and accept length. The default suite
is meant for real models: against the tiny lab model its prompt-aware checks fail; only its time is
of interest here. Server start-up (mostly `import torch`) is reported separately.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from k26ctl.smoke import SmokeOptions, SmokeTarget, load_suite, run_smoke  # noqa: E402
from tests.support.lab_server import lab_server  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--profiles", nargs="+", default=["none", "ddtree-b16-patched"])
    parser.add_argument("--suites", nargs="+", default=["lab", "default"])
    parser.add_argument("--concurrency", nargs="+", type=int, default=[2, 4, 8])
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    print(
        f"{'profile':<20} {'suite':<8} {'conc':>4} {'reqs':>5} {'wall best':>9} {'wall med':>9} "
        f"{'sum lat':>8} {'tok/s':>7} {'accept':>6} {'verdict':>7}"
    )
    for profile in args.profiles:
        started = time.monotonic()
        with lab_server(profile, patched=profile.endswith("-patched")) as server:
            print(f"# {profile}: server ready in {time.monotonic() - started:.1f} s")
            for suite_name in args.suites:
                suite = load_suite(suite_name)
                for concurrency in args.concurrency:
                    walls: list[float] = []
                    report = None
                    for _ in range(args.repeats):
                        report = run_smoke(
                            SmokeTarget(server.url), suite, options=SmokeOptions(concurrency=concurrency)
                        )
                        walls.append(report.wall_seconds)
                    assert report is not None
                    latency = sum(r.elapsed for r in report.results)
                    rates = [r.tokens_per_s for r in report.results if r.tokens_per_s]
                    accepts = report.accept_lengths
                    print(
                        f"{profile:<20} {suite_name:<8} {concurrency:>4} {len(report.results):>5} "
                        f"{min(walls):>8.2f}s {statistics.median(walls):>8.2f}s {latency:>7.2f}s "
                        f"{statistics.mean(rates) if rates else 0:>7.0f} "
                        f"{statistics.mean(accepts) if accepts else float('nan'):>6.2f} "
                        f"{'pass' if report.passed else 'FAIL':>7}"
                    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
