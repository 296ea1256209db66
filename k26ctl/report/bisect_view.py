"""The bisect page's content, from `bisect-config --json` or `bisect-config log --json`."""

from __future__ import annotations

from typing import Any

from k26ctl.report import charts
from k26ctl.report.restarts import restart_chart
from k26ctl.report.values import as_dict
from k26ctl.report.values import num as _num
from k26ctl.report.values import shown as _shown

VERDICT_STYLE = {  # colour and hatch: the hatch tells the verdicts apart without colour as well
    "good": (charts.GOOD, ""),
    "bad": (charts.BAD, "//"),
    "skip": (charts.SKIP, ".."),
}


def normalise(doc: dict[str, Any]) -> dict[str, Any]:
    """One shape for both documents: outcome (the result) and steps with their evidence when known."""
    if isinstance(doc.get("spec"), dict):  # the session log
        spec = doc["spec"]
        outcome = as_dict(doc.get("outcome")) or None
        key = spec.get("param")
        steps = []
        for s in doc.get("steps") or []:
            if not isinstance(s, dict):
                continue
            assignment = as_dict(s.get("assignment"))
            value = (
                assignment.get(key)
                if spec.get("mode") == "numeric" and set(assignment) == {key}
                else assignment
            )
            steps.append({**s, "value": value})
        return {
            "mode": spec.get("mode"),
            "key": key,
            "candidates": spec.get("candidates") or [],
            "outcome": outcome,
            "steps": steps,
            "session": doc.get("session"),
            "finished": outcome is not None,
        }
    steps = [s for s in doc.get("steps") or [] if isinstance(s, dict)]
    return {
        "mode": doc.get("mode"),
        "key": doc.get("key"),
        "candidates": [],
        "outcome": doc,
        "steps": steps,
        "session": doc.get("session"),
        "finished": True,
    }


def timeline_chart(steps: list[dict[str, Any]], name: str) -> Any:
    if not steps:
        return None
    with charts.figure(7.0, 0.9 + 0.36 * len(steps)) as fig:
        ax = fig.subplots()
        start = 0.0
        seen: set[str] = set()
        for row, step in enumerate(steps):
            seconds = _num(step.get("seconds")) or 0.0
            verdict = str(step.get("verdict"))
            colour, hatch = VERDICT_STYLE.get(verdict, (charts.SKIP, "xx"))
            label = verdict if verdict not in seen else None
            seen.add(verdict)
            ax.broken_barh(
                [(start, seconds)],
                (row - 0.35, 0.7),
                facecolors=colour,
                hatch=hatch,
                edgecolor=charts.INK,
                linewidth=0.5,
                label=label,
            )
            load = _num(step.get("load_seconds"))
            if load:
                ax.broken_barh(
                    [(start, min(load, seconds))],
                    (row - 0.35, 0.18),
                    facecolors=charts.INK,
                    label=None if "load" in seen else "server load",
                )
                seen.add("load")
            text = f" {_shown(step.get('value'))}: {verdict}"
            if not step.get("restarted", True):
                text += " (no restart)"
            ax.text(start + seconds, row, text, va="center", fontsize=8)
            start += seconds
        ax.set_yticks(range(len(steps)), [f"step {n + 1}" for n in range(len(steps))])
        ax.invert_yaxis()
        ax.set_xlim(0, start * 1.35 if start else 1)
        ax.set_xlabel("seconds since the search started (restart, load, smoke, laid end to end)")
        ax.grid(axis="y", visible=False)
        ax.legend(fontsize=8, loc="lower right")
        return charts.svg(fig, name, "Timeline of the search's restarts with their verdicts")


def interval_chart(view: dict[str, Any], name: str) -> Any:
    """The interval [last good, first bad] after each step (numeric searches over numbers)."""
    steps = view["steps"]
    values = [s.get("value") for s in steps]
    if view["mode"] != "numeric" or not steps or any(_num(v) is None for v in values):
        return None
    candidates = [float(c) for c in view["candidates"] if _num(c) is not None]
    lo = min(candidates) if candidates else min(float(v) for v in values)
    hi = max(candidates) if candidates else max(float(v) for v in values)
    lows, highs = [lo], [hi]
    good, bad = None, None
    for step in steps:
        value = float(step["value"])
        if step.get("verdict") == "good":
            good = value if good is None else max(good, value)
        elif step.get("verdict") == "bad":
            bad = value if bad is None else min(bad, value)
        lows.append(good if good is not None else lo)
        highs.append(bad if bad is not None else hi)
    xs = list(range(len(lows)))
    with charts.figure(7.0, 3.0) as fig:
        ax = fig.subplots()
        ax.fill_between(
            xs, lows, highs, step="post", color=charts.PALETTE[4], alpha=0.35, label="interval still searched"
        )
        ax.step(xs, highs, where="post", color=charts.BAD, marker="v", label="lowest bad value so far")
        ax.step(xs, lows, where="post", color=charts.GOOD, marker="^", label="highest good value so far")
        ax.set_xticks(xs, ["claimed"] + [f"step {n}" for n in xs[1:]])
        ax.set_ylabel(str(view["key"]))
        ax.set_xlabel("after each step")
        ax.legend(fontsize=8, loc="upper right")
        return charts.svg(fig, name, "How the searched interval narrowed step by step")


def bisect_view(doc: dict[str, Any], name: str = "bisect") -> dict[str, Any]:
    view = normalise(doc)
    view["doc"] = doc
    view["timeline"] = timeline_chart(view["steps"], f"{name}-timeline")
    view["interval"] = interval_chart(view, f"{name}-interval")
    view["restarts"] = restart_chart(
        [(f"step {s.get('step') or n + 1}", s.get("phases")) for n, s in enumerate(view["steps"])],
        f"{name}-restarts",
    )
    return view
