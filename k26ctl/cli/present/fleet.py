"""A fleet roll on the terminal: one line per member phase on stderr, then where every member stands."""

from __future__ import annotations

import sys
from typing import Any


def progress(event: Any) -> None:
    if event.kind == "deploy":
        if event.data.get("kind") == "step":
            print(f"  [{event.member}] deploy: {event.message}", file=sys.stderr, flush=True)
        return
    who = f"[{event.member}] " if event.member else ""
    if event.kind == "phase":
        detail = event.data.get("detail") or ""
        line = f"{who}{event.message}" + (f": {detail}" if detail and detail not in event.message else "")
    elif event.kind == "step":
        return
    elif event.kind in ("done", "halt"):
        line = f"roll {'finished' if event.kind == 'done' else 'stopped'}: {event.message}"
    else:
        line = f"{who}{event.kind}: {event.message}"
    print(line, file=sys.stderr, flush=True)


def result_text(result: Any) -> str:
    record = result.record
    lines = [f"fleet {record.fleet}: {record.action} {record.status} (run {record.run_id}): {record.reason}"]
    width = max(len(n) for n in record.members)
    for name, state in record.members.items():
        order = ("remove", "drain", "deploy", "rollback", "add", "soak")
        steps = " ".join(f"{k} {state.seconds[k]:.1f}s" for k in order if k in state.seconds)
        where = result.where()[name]
        detail = f"  [{state.detail}]" if state.detail and state.phase not in ("new", "old") else ""
        lines.append(f"  {name:<{width}}  {where:<40} {steps}{detail}")
    lines.append(f"wall {result.wall_seconds:.1f}s")
    if record.status in ("halted", "interrupted"):
        lines.append("  members out of the router stay out; continue with --resume once fixed")
    return "\n".join(lines)
