"""`k26ctl watch`'s text: one line per cycle, per state change, per last verdict, per service."""

from __future__ import annotations

from typing import Any

from k26ctl.termsafe import clean


def cycle_line(record: dict[str, Any]) -> str:
    if "message" in record:
        return f"watch: {record['message']}"
    parts = [f"{record.get('time', '')} {record.get('state')}"]
    if record.get("verdict") == "skipped":
        return f"{parts[0]}: cycle skipped, {record.get('reason', '')}"
    if record.get("changed"):
        parts[0] += " (changed)"
    probes = (record.get("evidence") or {}).get("probes")
    details = [f"cycle {record.get('cycle_s', 0):.1f} s", f"{record.get('requests', 0)} requests",
               f"{record.get('generated_tokens', 0)} tokens"]  # fmt: skip
    if probes:
        details.append(f"probes {probes['mismatches']}/{probes['checked']}")
    if record.get("accept_length"):
        details.append(f"accept {record['accept_length']:.2f}")
    line = f"{parts[0]}: " + ", ".join(details)
    reasons = record.get("reasons") or []
    if reasons and record.get("verdict") != "healthy":
        line += "; " + "; ".join(str(r) for r in reasons[:3])
    first = (record.get("evidence") or {}).get("first_mismatch")
    if first:
        line += "; " + mismatch_text(first)
    return line


def change_line(record: dict[str, Any]) -> str:
    line = f"{record.get('time')} {record.get('before')} -> {record.get('after')}"
    if record.get("watcher"):
        line += f" [seen by {record['watcher']}]"
    reasons = record.get("reasons") or []
    if reasons:
        line += ": " + "; ".join(str(r) for r in reasons[:2])
    first = (record.get("evidence") or {}).get("first_mismatch")
    if first:
        line += f" ({mismatch_text(first)})"
    return clean(line, limit=2000)


def mismatch_text(first: dict[str, Any]) -> str:
    return (
        f"first mismatch {first.get('prompt_id')} token {first.get('position')}: "
        f"expected {first.get('expected')!r} got {first.get('got')!r}"
    )


def last_verdict_line(last: dict[str, Any] | None) -> str:
    if not last:
        return "watch: no verdict recorded yet"
    line = f"watch: {last.get('state')} (last cycle {last.get('time')}: {last.get('verdict')})"
    reasons = last.get("reasons") or []
    if reasons and last.get("verdict") != "healthy":
        line += "; " + str(reasons[0])
    return clean(line, limit=500)


def host_service_line(unit: str, host: str, state: dict[str, Any]) -> str:
    active = f"{state.get('ActiveState')} ({state.get('SubState')})"
    return f"{unit} on {host}: {state.get('LoadState')}, {active}, {state.get('UnitFileState') or '-'}"
