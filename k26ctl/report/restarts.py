"""Restart phases as a chart: one stacked horizontal bar per restart (stop -> ready), one colour and
hatch per phase, drawn from the phases a deploy document carries (`deploy.phases.RestartPhases
.to_json()`, read here as plain JSON: the report layer imports nothing above it)."""

from __future__ import annotations

from typing import Any

from k26ctl.report import charts
from k26ctl.report.values import as_dict

# The phase keys and labels of k26ctl.deploy.phases, in start-up order (kept as data here).
PHASES = (
    ("stop", "old server stopping"),
    ("imports", "imports and arguments"),
    ("launch", "tokenizer and scheduler start"),
    ("distributed", "distributed init"),
    ("model-setup", "model setup"),
    ("weights", "weight loading"),
    ("kv-cache", "KV cache"),
    ("init", "backends and scheduler"),
    ("graphs", "CUDA-graph capture"),
    ("server-start", "HTTP server start"),
    ("warmup", "warm-up"),
)
HATCHES = ("", "//", "..", "\\\\", "xx", "", "--", "++", "oo", "||", "**")


def phase_seconds(phases: Any) -> dict[str, float]:
    """Seconds per phase key of one restart's phases document (unknown shapes give nothing)."""
    data = as_dict(phases)
    out: dict[str, float] = {}
    for phase in data.get("phases") or []:
        if not isinstance(phase, dict):
            continue
        name, seconds = phase.get("name"), phase.get("duration")
        if isinstance(name, str) and isinstance(seconds, (int, float)) and not isinstance(seconds, bool):
            out[name] = out.get(name, 0.0) + float(seconds)
    return out


def phase_table(phases: Any) -> list[dict[str, Any]]:
    """Rows for a page's table: label, start, seconds, evidence."""
    rows = []
    labels = dict(PHASES)
    for phase in as_dict(phases).get("phases") or []:
        if isinstance(phase, dict) and isinstance(phase.get("duration"), (int, float)):
            rows.append(
                {
                    "label": labels.get(str(phase.get("name")), str(phase.get("name"))),
                    "start": phase.get("start"),
                    "seconds": phase.get("duration"),
                    "evidence": [str(e) for e in phase.get("evidence") or []][:2],
                }
            )
    return rows


def restart_chart(restarts: list[tuple[str, Any]], name: str) -> Any:
    """`restarts`: (label, phases document) per restart, drawn top to bottom; None when none has phases."""
    rows = [(label, phase_seconds(doc)) for label, doc in restarts]
    rows = [(label, seconds) for label, seconds in rows if seconds]
    if not rows:
        return None
    with charts.figure(7.0, 1.9 + 0.38 * len(rows)) as fig:
        ax = fig.add_subplot()
        seen: set[str] = set()
        for row, (_, seconds) in enumerate(rows):
            left = 0.0
            for index, (key, label) in enumerate(PHASES):
                width = seconds.get(key, 0.0)
                if width <= 0:
                    continue
                ax.barh(
                    row,
                    width,
                    left=left,
                    height=0.6,
                    color=charts.PALETTE[index % len(charts.PALETTE)],
                    hatch=HATCHES[index],
                    edgecolor=charts.INK,
                    linewidth=0.3,
                    label=label if key not in seen else None,
                )
                seen.add(key)
                left += width
            ax.text(left, row, f" {left:.1f} s", va="center", fontsize=8)
        ax.set_yticks(range(len(rows)), [label for label, _ in rows])
        ax.invert_yaxis()
        ax.set_xlabel("seconds from the old server's stop to the new one's ready line")
        # above the bars, inside the figure: constrained layout makes room for an axes legend
        ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.02), ncol=4, fontsize=8)
        return charts.svg(fig, name, "restart phases, one stacked bar per restart")
