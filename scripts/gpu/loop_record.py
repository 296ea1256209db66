"""Merge the `lab demo --gpu --record` files of one or more calls into docs/real-gpu-loop.json and .md.

    python3 scripts/gpu/loop_record.py --device "..." --date 2026-12-05 \
        --call "bash scripts/gpu/loop.sh OUT broken,bisect=/path/loop-broken-bisect.json" \
        --call "bash scripts/gpu/loop.sh OUT fixed,sweep=/path/loop-fixed-sweep.json" \
        --note "..." [--out docs/real-gpu-loop]

The calls run on one machine, one lab host: the host's deploy history grows across them, so the restarts
come from the last record. `--render docs/real-gpu-loop.json` rewrites the Markdown from the JSON alone.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

KIND = "real-gpu-loop"
SCHEMA_VERSION = 2
# the phases the restart table shows, in start-up order (k26ctl/deploy/phases.py names)
PHASE_COLUMNS = (
    ("stop", "stop"),
    ("imports", "imports"),
    ("launch", "tokenizer + scheduler"),
    ("kv-cache", "KV cache"),
    ("graphs", "CUDA graphs"),
    ("warmup", "warm-up"),
)


def merge(calls: list[tuple[str, Path]], device: str, date: str, notes: list[str]) -> dict[str, Any]:
    records = [(command, json.loads(path.read_text())) for command, path in calls]
    steps: list[dict[str, Any]] = []
    for command, record in records:
        for step in record["steps"]:
            steps.append({**step, "call": command})
    restarts = records[-1][1].get("restarts", []) if records else []
    expected = all(s["as_expected"] for s in steps)
    return {
        "kind": KIND,
        "schema_version": SCHEMA_VERSION,
        "device": device,
        "release": "sglang 0.5.15 (registry wheel), torch 2.11.0+cu130, Python 3.12, under systemd 252 in "
        "the GPU lab host",
        "date": date,
        "commands": [command for command, _ in records],
        "complete": expected
        and {s["name"] for s in steps} >= {"broken deploy", "bisect", "fixed deploy", "sweep"},
        "steps": steps,
        "restarts": restarts,
        "start_times": start_times(restarts),
        "notes": notes,
    }


def phase_seconds(restart: dict[str, Any]) -> dict[str, float]:
    phases = (restart.get("phases") or {}).get("phases") or []
    totals: dict[str, float] = {}
    for phase in phases:
        totals[phase["name"]] = totals.get(phase["name"], 0.0) + float(phase["duration"])
    return totals


def start_times(restarts: list[dict[str, Any]]) -> dict[str, Any]:
    """Cold: the first start on a fresh machine (empty JIT caches); warm: every later one."""
    loads = [r["load_seconds"] for r in restarts if r.get("load_seconds") is not None]
    stops = [phase_seconds(r).get("stop") for r in restarts]
    stops_seen = [s for s in stops if s is not None]
    if not loads:
        return {}
    warm = loads[1:]
    return {
        "cold_seconds": round(loads[0], 1),
        "warm_seconds": {
            "n": len(warm),
            "min": round(min(warm), 1) if warm else None,
            "median": round(statistics.median(warm), 1) if warm else None,
            "max": round(max(warm), 1) if warm else None,
        },
        "stop_seconds": {
            "n": len(stops_seen),
            "min": round(min(stops_seen), 1) if stops_seen else None,
            "max": round(max(stops_seen), 1) if stops_seen else None,
        },
    }


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def render(doc: dict[str, Any]) -> str:
    state = "complete" if doc["complete"] else "not complete"
    lines = [
        f"# The users' loop on a real GPU: `k26ctl lab demo --gpu` ({state}, {doc['date']})",
        "",
        f"Real {doc['release']} on {doc['device']}. Written by `scripts/gpu/loop_record.py` from the "
        "demo's `--record` files; the data: `real-gpu-loop.json` (each step's deploy, bisect and sweep "
        "document, the host's restarts with their phases).",
        "",
        "Commands (one lab host, one warm machine; one command may run 10 minutes there):",
        "",
        *[f"- `{c}`" for c in doc["commands"]],
        "",
        "## Steps",
        "| step | expected | got | as expected | s |",
        "|---|---|---|---|---|",
    ]
    for step in doc["steps"]:
        mark = "yes" if step["as_expected"] else "**no**"
        lines.append(
            f"| {step['name']} | {step['expected']} | {step['got']} | {mark} | {step['seconds']:.1f} |"
        )
    for step in doc["steps"]:
        if step.get("detail"):
            lines += ["", f"{step['name']}:", "", *[f"- `{d}`" for d in step["detail"]]]
    lines += _bisect_section(doc) + _sweep_section(doc) + _restart_section(doc)
    if doc.get("notes"):
        lines += ["", "## Notes", "", *[f"- {n}" for n in doc["notes"]]]
    return "\n".join(lines) + "\n"


def _document(doc: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for step in doc["steps"]:
        if (step.get("document") or {}).get("kind") == kind:
            return dict(step["document"])
    return None


def _bisect_section(doc: dict[str, Any]) -> list[str]:
    bisect = _document(doc, "bisect")
    if bisect is None:
        return []
    lines = [
        "",
        f"## Bisect: {bisect['key']}, {bisect['candidates']} candidates, at most {bisect['max_restarts']} "
        f"deploys (a linear search: {bisect['linear_restarts']})",
        f"Found: first bad **{bisect['first_bad']}**, last good **{bisect['last_good']}**, "
        f"{bisect['restarts']} restarts in {bisect['seconds']:.0f} s.",
        "",
        "| step | value | verdict | restarted | s | server start s |",
        "|---|---|---|---|---|---|",
    ]
    for number, step in enumerate(bisect["steps"], 1):
        lines.append(
            f"| {number} | {step['value']} | {step['verdict']} | {'yes' if step['restarted'] else 'no'} | "
            f"{step['seconds']:.1f} | {_cell(step.get('load_seconds'))} |"
        )
    return lines


def _sweep_section(doc: dict[str, Any]) -> list[str]:
    sweep = _document(doc, "sweep")
    if sweep is None:
        return []
    best = sweep.get("best") or {}
    as_deployed = " (the profile as deployed)" if best.get("role") == "default" else ""
    lines = [
        "",
        f"## Sweep: {sweep['objective']['description']}",
        f"Recommends **{_assignment(best)}**{as_deployed}; {sweep['restarts']} restarts.",
        "",
        "| point | tok/s at 1 | accept length at 1 | tok/s at 8 | smoke |",
        "|---|---|---|---|---|",
    ]
    for point in sweep["points"]:
        levels = {level["concurrency"]: level for level in point.get("levels") or []}
        one, eight = levels.get(1, {}), levels.get(8, {})
        smoke = "pass" if point.get("coherent") else "fail"
        lines.append(
            f"| {_assignment(point)} | {_cell(one.get('output_tokens_per_s'))} | "
            f"{_cell(one.get('accept_length'))} | {_cell(eight.get('output_tokens_per_s'))} | {smoke} |"
        )
    return lines


def _assignment(point: dict[str, Any]) -> str:
    return ", ".join(f"{key}={value}" for key, value in (point.get("assignment") or {}).items()) or "-"


def _restart_section(doc: dict[str, Any]) -> list[str]:
    times = doc.get("start_times") or {}
    warm = times.get("warm_seconds") or {}
    stop = times.get("stop_seconds") or {}
    header = " | ".join(title for _, title in PHASE_COLUMNS)
    lines = [
        "",
        "## Restarts and their phases (SGLang's own log lines, `k26ctl/deploy/phases.py`)",
        "Cold start (the first on a fresh machine, JIT caches empty): "
        f"**{_cell(times.get('cold_seconds'))} s**; "
        f"warm starts (Triton's cache kept under the unit's CacheDirectory): **{_cell(warm.get('min'))}-"
        f"{_cell(warm.get('max'))} s**, median {_cell(warm.get('median'))} s over {warm.get('n', 0)}. "
        f"The old server's stop: {_cell(stop.get('min'))}-{_cell(stop.get('max'))} s.",
        "",
        f"| recorded at | draft tokens | patches | verdict | start -> ready | {header} |",
        "|---|---|---|---|---|" + "---|" * len(PHASE_COLUMNS),
    ]
    for restart in doc["restarts"]:
        seconds = phase_seconds(restart)
        cells = " | ".join(_cell(seconds.get(name)) for name, _ in PHASE_COLUMNS)
        spec = restart.get("speculative") or {}
        patches = ", ".join(restart.get("patches") or []) or "-"
        lines.append(
            f"| {restart['time']} | {spec.get('block_size')} | {patches} | {restart['verdict']} | "
            f"{_cell(restart.get('load_seconds'))} | {cells} |"
        )
    return lines


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--call", action="append", default=[], help="COMMAND=RECORD.json, in the order run")
    parser.add_argument("--device", default="")
    parser.add_argument("--date", default="")
    parser.add_argument("--note", action="append", default=[])
    parser.add_argument("--out", default="docs/real-gpu-loop", help="path without .json/.md")
    parser.add_argument("--render", metavar="JSON", help="rewrite the Markdown from this JSON only")
    args = parser.parse_args(argv)
    out = Path(args.out)
    if args.render:
        doc = json.loads(Path(args.render).read_text())
    else:
        calls = []
        for spec in args.call:
            command, sep, path = spec.rpartition("=")
            if not sep:
                parser.error(f"--call {spec!r}: write COMMAND=RECORD.json")
            calls.append((command, Path(path)))
        if not calls:
            parser.error("give at least one --call")
        doc = merge(calls, args.device, args.date, args.note)
        out.with_suffix(".json").write_text(json.dumps(doc, indent=1) + "\n")
    out.with_suffix(".md").write_text(render(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
