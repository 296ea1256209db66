"""A restart's phases as text: one line per phase with its seconds, share and a bar, for `deploy`'s
report and `status`'s history."""

from __future__ import annotations

from typing import Any

from k26ctl.termsafe import clean

BAR_WIDTH = 30


def phase_lines(data: dict[str, Any], *, indent: str = "  ", evidence: bool = False) -> list[str]:
    """`data` is `RestartPhases.to_json()` (as the deploy result and the host's history keep it)."""
    from k26ctl.deploy.phases import RestartPhases

    phases = RestartPhases.from_json(data)
    total = phases.downtime_seconds
    if not phases.phases or total <= 0:
        return []
    ready = "ready" if phases.ready else "not ready"
    wording = f", SGLang {phases.wording} lines" if phases.wording else ""
    lines = [f"{indent}restart phases: stop -> {ready} {total:.1f} s{wording}"]
    for phase in phases.phases:
        share = phase.duration / total
        bar = "#" * max(1 if phase.duration > 0 else 0, round(share * BAR_WIDTH))
        extra = _detail(phase.detail)
        row = f"{indent}  {phase.label:<30} {phase.duration:7.1f} s {share:4.0%} {bar:<{BAR_WIDTH}}{extra}"
        lines.append(row.rstrip())
        if evidence:
            for line in phase.evidence[:2]:
                lines.append(f"{indent}      | {clean(line, limit=140)}")
    return lines


def _detail(detail: dict[str, Any]) -> str:
    parts = []
    if detail.get("bytes"):
        parts.append(f"{detail['bytes'] / (1 << 30):.2f} GiB")
    if detail.get("rate_gb_s"):
        parts.append(f"{detail['rate_gb_s']:.2f} GB/s")
    if detail.get("shards"):
        parts.append(f"{detail['shards']} shards")
    if detail.get("tokens"):
        parts.append(f"{detail['tokens']} tokens")
    for capture in detail.get("captures") or []:
        if "seconds" in capture:
            parts.append(f"{capture['name']} {capture['seconds']:.1f} s")
    return f"  ({', '.join(parts)})" if parts else ""
