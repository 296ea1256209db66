"""The sweep page's content, from `sweep --json` or `sweep log --json`."""

from __future__ import annotations

import json
from typing import Any

from k26ctl.report import charts
from k26ctl.report.restarts import restart_chart
from k26ctl.report.values import num as _num
from k26ctl.report.values import shown as _shown

# roles of points that sit on the swept axes (controls are other configurations, drawn as lines)
ON_AXES = ("search", "default")


def _level(point: dict[str, Any], concurrency: Any) -> dict[str, Any] | None:
    for level in point.get("levels") or []:
        if isinstance(level, dict) and level.get("concurrency") == concurrency:
            return level
    return None


def swept_keys(points: list[dict[str, Any]]) -> list[str]:
    keys: list[str] = []
    for point in points:
        if point.get("role") in ON_AXES and isinstance(point.get("assignment"), dict):
            keys += [k for k in point["assignment"] if k not in keys]
    return keys


def _axis(values: list[Any]) -> tuple[list[float], list[str] | None]:
    """Positions on the x axis: the values themselves when all are numbers, else their order."""
    if all(_num(v) is not None for v in values):
        return [float(v) for v in values], None
    return [float(i) for i in range(len(values))], [_shown(v) for v in values]


def param_chart(doc: dict[str, Any], key: str, keys: list[str], name: str) -> Any:
    points = [p for p in doc.get("points") or [] if isinstance(p, dict)]
    on_axes = [p for p in points if p.get("role") in ON_AXES and key in (p.get("assignment") or {})]
    if not on_axes:
        return None
    values: list[Any] = []
    for p in on_axes:
        if p["assignment"][key] not in values:
            values.append(p["assignment"][key])
    if all(_num(v) is not None for v in values):
        values.sort(key=float)
    xs, ticks = _axis(values)
    where = {json.dumps(v, sort_keys=True): x for v, x in zip(values, xs, strict=True)}
    others = [k for k in keys if k != key]
    best_number = (doc.get("best") or {}).get("number")
    with charts.figure(7.0, 3.6) as fig:
        ax = fig.subplots()
        groups: dict[str, list[dict[str, Any]]] = {}
        for p in on_axes:
            label = ", ".join(f"{k}={_shown(p['assignment'].get(k, 'default'))}" for k in others)
            groups.setdefault(label or "measured", []).append(p)
        top = 0.0
        for n, (label, members) in enumerate(groups.items()):
            measured = sorted(
                (where[json.dumps(p["assignment"][key], sort_keys=True)], _num(p.get("output_tokens_per_s")))
                for p in members
                if p.get("coherent") and _num(p.get("output_tokens_per_s")) is not None
            )
            if measured:
                top = max(top, *(y for _, y in measured if y is not None))
                ax.plot(
                    [x for x, _ in measured],
                    [y for _, y in measured],
                    marker=charts.MARKERS[n % len(charts.MARKERS)],
                    color=charts.PALETTE[n % len(charts.PALETTE)],
                    label=label,
                )
        controls = [p for p in points if p.get("role") == "control" and _num(p.get("output_tokens_per_s"))]
        for n, p in enumerate(controls):
            y = float(p["output_tokens_per_s"])
            top = max(top, y)
            ax.axhline(y, color=charts.SKIP, linestyle=(0, (4, 2 + n)), linewidth=1)
            mark = " (recommended)" if p.get("number") == best_number else ""
            ax.text(xs[0], y, f" {p.get('label')} {y:.1f}{mark}", fontsize=8, va="bottom")
        incoherent = [p for p in on_axes if p.get("coherent") is False or p.get("up") is False]
        if incoherent:
            ix = [where[json.dumps(p["assignment"][key], sort_keys=True)] for p in incoherent]
            ax.scatter(
                ix,
                [0.0] * len(ix),
                marker="X",
                s=70,
                color=charts.BAD,
                zorder=5,
                label="incoherent: smoke failed, not measured",
                clip_on=False,
            )
            for x in sorted(set(ix)):
                ax.annotate(
                    "incoherent",
                    (x, 0.0),
                    textcoords="offset points",
                    xytext=(0, 9),
                    ha="center",
                    fontsize=8,
                    color=charts.BAD,
                )
        best = next((p for p in on_axes if p.get("number") == best_number and p.get("coherent")), None)
        if best is not None and _num(best.get("output_tokens_per_s")) is not None:
            bx = where[json.dumps(best["assignment"][key], sort_keys=True)]
            ax.scatter(
                [bx],
                [best["output_tokens_per_s"]],
                marker="*",
                s=260,
                color=charts.PALETTE[6],
                edgecolor=charts.INK,
                zorder=6,
                label="recommended",
            )
        if ticks is not None:
            ax.set_xticks(xs, ticks)
        elif all(float(v).is_integer() for v in xs):
            ax.set_xticks(xs)
        ax.set_ylim(0, max(top, 1.0) * 1.18)
        ax.set_xlabel(key)
        concurrency = (doc.get("objective") or {}).get("concurrency")
        ax.set_ylabel(f"output tokens/s at concurrency {concurrency}")
        ax.legend(fontsize=8, loc="best")
        return charts.svg(fig, name, f"Output tokens per second against {key}")


def pareto_chart(doc: dict[str, Any], name: str) -> Any:
    front = [n for n in doc.get("pareto") or [] if isinstance(n, int)]
    concurrency = (doc.get("objective") or {}).get("concurrency")
    rows = []
    for p in doc.get("points") or []:
        level = _level(p, concurrency) if isinstance(p, dict) and p.get("coherent") else None
        if level and _num(level.get("itl_p99_ms")) is not None and _num(level.get("output_tokens_per_s")):
            rows.append((float(level["itl_p99_ms"]), float(level["output_tokens_per_s"]), p))
    if len(rows) < 2 or not front:
        return None
    with charts.figure(7.0, 3.4) as fig:
        ax = fig.subplots()
        ax.scatter(
            [r[0] for r in rows], [r[1] for r in rows], color=charts.SKIP, marker="o", label="measured point"
        )
        on = sorted((r for r in rows if r[2].get("number") in front), key=lambda r: r[0])
        ax.plot(
            [r[0] for r in on],
            [r[1] for r in on],
            color=charts.PALETTE[0],
            marker="D",
            label="Pareto front",
        )
        for itl, tps, p in rows:
            ax.annotate(
                f"#{p.get('number')}", (itl, tps), textcoords="offset points", xytext=(4, 4), fontsize=8
            )
        ax.set_xlabel(f"p99 inter-token latency at concurrency {concurrency} (ms, lower is better)")
        ax.set_ylabel("output tokens/s (higher is better)")
        ax.legend(fontsize=8, loc="best")
        return charts.svg(fig, name, "Pareto front of throughput against p99 inter-token latency")


def sweep_view(doc: dict[str, Any], name: str = "sweep") -> dict[str, Any]:
    points = [p for p in doc.get("points") or [] if isinstance(p, dict)]
    keys = swept_keys(points)
    concurrency = (doc.get("objective") or {}).get("concurrency")
    levels = sorted(
        {lv.get("concurrency") for p in points for lv in p.get("levels") or [] if isinstance(lv, dict)},
        key=lambda c: c if isinstance(c, int) else 0,
    )
    rows = []
    for p in points:
        target = _level(p, concurrency)
        rows.append(
            {
                "p": p,
                "assignment": ", ".join(f"{k}={_shown(v)}" for k, v in (p.get("assignment") or {}).items()),
                "target": target or {},
                "by_level": [(_level(p, c) or {}).get("output_tokens_per_s") for c in levels],
                "pareto": p.get("number") in (doc.get("pareto") or []),
                "best": p.get("number") == (doc.get("best") or {}).get("number"),
            }
        )
    return {
        "doc": doc,
        "params": keys,
        "levels": levels,
        "rows": rows,
        "charts": [
            c for n, k in enumerate(keys) if (c := param_chart(doc, k, keys, f"{name}-p{n}")) is not None
        ],
        "pareto_chart": pareto_chart(doc, f"{name}-pareto"),
        "restarts": restart_chart(
            [(f"point {p.get('number')}", p.get("phases")) for p in points], f"{name}-restarts"
        ),
        "best_assignment": ", ".join(
            f"{k}={_shown(v)}" for k, v in ((doc.get("best") or {}).get("assignment") or {}).items()
        ),
    }
