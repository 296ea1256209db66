#!/usr/bin/env python3
"""`k26ctl render` with large environment values: linear in a value's length.

    python3 benchmarks/render_large_values.py [--sizes 30,60,120,240] [--old-up-to 120] [--json]

For each size (KB) a profile extends profiles/lab/ddtree-b16.yaml with one environment value of that
many letters (no space: the input that made the old redaction backtrack), and, last, fifteen values
of 64 KB (a profile file holds 1 MB at most). Measured in this process, best of --rounds:
- render: what `k26ctl render` does after loading (the unit, secrets and URL credentials redacted);
- render (old): the same with the regular expression the URL-credential redaction used before
  (tried at every position, it backtracks over a run of letters: quadratic), up to --old-up-to KB;
- validate: `validate_profile` of the same profile without systemd-analyze, the yardstick the
  slow render was held against.
The table gives seconds, render/validate and old/new. Loopback-free, one core.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

BASE = REPO / "profiles" / "lab" / "ddtree-b16.yaml"


@contextmanager
def old_redaction() -> Iterator[None]:
    import k26ctl.render as render
    from tests.support.redaction_oracle import old_redact_url_credentials

    new = render.redact_url_credentials
    render.redact_url_credentials = old_redact_url_credentials
    try:
        yield
    finally:
        render.redact_url_credentials = new


def profile_file(directory: Path, values: int, kb: int) -> Path:
    import yaml

    environment = {f"BIG_{i}": "a" * (kb * 1000) for i in range(values)}
    path = directory / f"big-{values}x{kb}k.yaml"
    data = {"extends": str(BASE), "service": {"environment": environment}}
    path.write_text(yaml.safe_dump(data, width=10**9), encoding="utf-8")
    return path


def best(rounds: int, run: Callable[[], Any]) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return min(times)


def measure(path: Path, rounds: int, old: bool) -> dict[str, Any]:
    from k26ctl.profile import load_profile
    from k26ctl.render import rendered_document
    from k26ctl.validate import validate_profile

    profile = load_profile(str(path)).profile
    render_s = best(rounds, lambda: rendered_document(profile, "unit"))
    validate_s = best(rounds, lambda: validate_profile(profile, systemd=False))
    old_s = None
    if old:
        with old_redaction():
            old_s = best(1, lambda: rendered_document(profile, "unit"))
    return {"render_s": render_s, "validate_s": validate_s, "render_old_s": old_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="30,60,120,240", help="value sizes in KB, comma-separated")
    parser.add_argument("--old-up-to", type=int, default=120, help="time the old redaction up to this KB")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="k26-render-bench-") as tmp:
        # fifteen values as large as a profile (1 MB at most) holds
        cases = [(1, kb) for kb in sizes] + [(15, 64)]
        for values, kb in cases:
            path = profile_file(Path(tmp), values, kb)
            old = values == 1 and kb <= args.old_up_to
            rows.append({"values": values, "kb": kb, **measure(path, args.rounds, old)})
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print("| values x KB | render s | validate s | render/validate | render (old) s | old/new |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        new, old = row["render_s"], row["render_old_s"]
        old_s, ratio = ("-", "-") if old is None else (f"{old:.2f}", f"{old / new:.0f}x")
        print(
            f"| {row['values']} x {row['kb']} | {new:.3f} | {row['validate_s']:.3f} | "
            f"{new / row['validate_s']:.2f} | {old_s} | {ratio} |"
        )


if __name__ == "__main__":
    main()
