"""The README's report screenshots, from lab runs, in one command.

    python3 scripts/report_screenshots.py [--lab NAME] [--out docs/screenshots]
    python3 scripts/report_screenshots.py --json-dir DIR     # pages from saved --json results instead

Without --json-dir it runs, as root on this machine: `k26ctl lab demo --html W` (the unpatched and
patched deploys' smoke pages, each with its JSON), the demo's budget bisect with its session log
(`bisect-config ... --json`, `bisect-config log --json`, then `reset`), a short two-key sweep
(`sweep ... --json`, then `sweep reset`) and `k26ctl lab demo --fleet --html W` (fleet NAME-fleet).
It then writes every page again through `k26ctl report` (the same page) and takes the screenshots
in Debian's headless Chromium, failing on any console message.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.browser import chromium  # noqa: E402

SUITE = "smoke.suite=benchmarks/data/sweep-smoke-suite.yaml"
BISECT = [
    "bisect-config", "profiles/lab/ddtree-b16.yaml", "--set", SUITE, "--param", "spec.ddtree.budget",
    "--good", "7", "--bad", "16", "--yes", "--json", "--session", "screenshots",
]  # fmt: skip
SWEEP = [
    "sweep", "profiles/lab/sweep.yaml", "--set", SUITE,
    "--param", "spec.ddtree.budget=4..10:2", "--param", "spec.ddtree.max_topk=1,2",
    "--concurrency", "1,2", "--requests", "4", "--max-tokens", "32", "--max-restarts", "9", "--yes", "--json",
]  # fmt: skip
# screenshot name -> (page, CSS selector of the element shot, or None for the top of the page)
SHOTS = {
    "smoke-unpatched": ("unpatched-budget-16", None),
    "smoke-unpatched-request": ("unpatched-budget-16", "section.result.bad"),
    "smoke-patched": ("patched-budget-16", None),
    "bisect-log": ("bisect-log", None),
    "sweep": ("sweep", None),
    "fleet-halted": ("fleet-halted-bad-roll", None),
}


def k26ctl(*args: str, stdout: Path | None = None) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    print("+ k26ctl " + " ".join(args), flush=True)
    with open(stdout, "w") if stdout else open(os.devnull, "w") as out:
        done = subprocess.run([sys.executable, "-m", "k26ctl", *args], cwd=ROOT, env=env, stdout=out)
    if done.returncode not in (0, 1):  # 1: a demo step or a roll that was meant to fail
        raise SystemExit(f"k26ctl {args[0]} exited {done.returncode}")


def run_lab(lab: str, work: Path) -> None:
    k26ctl("lab", "demo", "--name", lab, "--html", str(work))
    k26ctl(*BISECT, "--set", f"host.lab={lab}", stdout=work / "bisect.json")
    k26ctl("bisect-config", "log", "--json", "--session", "screenshots", stdout=work / "bisect-log.json")
    k26ctl("bisect-config", "reset", "--yes", "--session", "screenshots")
    k26ctl(*SWEEP, "--set", f"host.lab={lab}", "--session", "screenshots", stdout=work / "sweep.json")
    k26ctl("sweep", "reset", "--yes", "--session", "screenshots")
    k26ctl("lab", "demo", "--fleet", "--name", f"{lab}-fleet", "--html", str(work))


def shoot(json_dir: Path, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    pages = Path(tempfile.mkdtemp(prefix="k26-pages-"))
    made = []
    with chromium() as browser:
        for shot, (stem, selector) in SHOTS.items():
            source = json_dir / f"{stem}.json"
            if not source.exists():
                print(f"skipped {shot}: no {source}", flush=True)
                continue
            page = pages / f"{stem}.html"
            k26ctl("report", str(source), "--html", str(page))
            with browser.open(page, width=1100, height=900) as loaded:
                target = out / f"{shot}.png"
                if selector is None:
                    loaded.page.screenshot(path=str(target))
                else:
                    loaded.page.query_selector(selector).screenshot(path=str(target))
            if loaded.console_errors:
                raise SystemExit(f"{page}: console errors {loaded.console_errors}")
            made.append(target)
            print(f"wrote {target.relative_to(ROOT) if target.is_relative_to(ROOT) else target}", flush=True)
    return made


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--lab", default="k26shots", help="lab host name for the runs")
    parser.add_argument("--json-dir", type=Path, help="saved --json results (NAME.json) instead of lab runs")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    args = parser.parse_args()
    json_dir = args.json_dir
    if json_dir is None:
        json_dir = Path(tempfile.mkdtemp(prefix="k26-report-runs-"))
        run_lab(args.lab, json_dir)
    shoot(json_dir, args.out)


if __name__ == "__main__":
    main()
