"""`k26ctl doctor`'s text: one line per thing k26ctl depends on, grouped by area."""

from __future__ import annotations

from typing import Any

from k26ctl.termsafe import clean

MARK = {
    "match": "ok",
    "new": "NEW",
    "unreadable": "CANNOT READ",
    "info": "-",
    "error": "ERROR",
    "warning": "WARN",
}


def doctor_text(report: Any) -> str:
    facts = report.facts
    source = "" if report.source == "host" else f" (from the bundle {clean(report.source, limit=200)})"
    lines = [
        f"doctor: {clean(facts.profile.name or '-')} on {clean(facts.host)},"
        f" collected {facts.collected}{source}",
        f"{'area':<8} {'item':<40} {'status':<12} seen",
    ]
    for row in report.rows:
        lines.append(
            f"{row.area:<8} {clean(row.item, limit=40):<40} {MARK.get(row.status, row.status):<12} "
            f"{clean(row.seen, limit=400)}"
        )
        if row.affects and row.status not in ("match", "info"):
            label = "hint" if row.area == "rules" else "affects"
            lines.append(f"{'':<8} {'':<40} {'':<12} {label}: {clean(row.affects, limit=400)}")
    counts = ", ".join(f"{n} {MARK.get(s, s)}" for s, n in sorted(report.to_json()["summary"].items()))
    lines.append(f"summary: {counts}")
    if report.bundle:
        lines.append(f"bundle written: {clean(report.bundle, limit=300)} (secrets removed)")
    return "\n".join(lines)
