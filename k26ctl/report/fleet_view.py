"""The fleet roll page's content, from a fleet `deploy --json` (kind fleet-roll)."""

from __future__ import annotations

from typing import Any

from k26ctl.report import charts
from k26ctl.report.values import as_dict
from k26ctl.report.values import num as _num

# the steps of one member, in the order the roll runs them
STEPS = ("remove", "drain", "deploy", "smoke", "add", "soak")
HATCHES = ("", "//", "", "..", "\\\\", "xx")


def lanes_chart(doc: dict[str, Any], order: list[str], name: str) -> Any:
    members = as_dict(doc.get("members"))
    if not order:
        return None
    with charts.figure(7.0, 1.0 + 0.5 * len(order)) as fig:
        ax = fig.subplots()
        start = 0.0
        seen: set[str] = set()
        for row, member in enumerate(order):
            state = members.get(member) or {}
            seconds = as_dict(state.get("seconds"))
            names = [s for s in STEPS if s in seconds] + [s for s in seconds if s not in STEPS]
            for step in names:
                took = _num(seconds.get(step)) or 0.0
                n = STEPS.index(step) if step in STEPS else len(STEPS) - 1
                ax.broken_barh(
                    [(start, took)],
                    (row - 0.35, 0.7),
                    facecolors=charts.PALETTE[n % 8],
                    hatch=HATCHES[n % len(HATCHES)],
                    edgecolor=charts.INK,
                    linewidth=0.4,
                    label=step if step not in seen else None,
                )
                seen.add(step)
                start += took
            if not names:
                ax.text(0, row, f" not rolled ({state.get('phase', '?')} config)", va="center", fontsize=8)
            if state.get("phase") in ("failed", "interrupted"):
                ax.text(
                    start,
                    row,
                    f"  {state.get('phase')}: halted here",
                    va="center",
                    fontsize=8,
                    color=charts.BAD,
                    fontweight="bold",
                )
        labels = [f"{m} (canary)" if n == 0 and len(order) > 1 else m for n, m in enumerate(order)]
        ax.set_yticks(range(len(order)), labels)
        ax.set_ylim(len(order) - 0.5, -0.5)  # the first member on top
        ax.set_xlim(0, max(start, 1.0) * 1.3)
        ax.set_xlabel("seconds, each member's steps laid end to end in roll order")
        ax.grid(axis="y", visible=False)
        fig.legend(fontsize=8, loc="outside upper center", ncols=max(len(seen), 1))
        return charts.svg(fig, name, "One lane per member: the steps of the roll")


def load_chart(load: dict[str, Any], name: str) -> Any:
    """Client success rate and latency across the roll, from `load.windows` when a load was measured."""
    windows = [w for w in load.get("windows") or [] if isinstance(w, dict) and _num(w.get("t")) is not None]
    if not windows:
        return None
    with charts.figure(7.0, 3.2) as fig:
        rate_ax = fig.subplots()
        t = [float(w["t"]) for w in windows]
        rate = [100.0 * (w.get("ok") or 0) / w["sent"] if w.get("sent") else None for w in windows]
        rate_ax.plot(t, rate, color=charts.PALETTE[0], marker="o", label="success rate (%)")
        rate_ax.set_ylim(0, 105)
        rate_ax.set_ylabel("client success rate (%)")
        rate_ax.set_xlabel("seconds since the roll started")
        lat_ax = rate_ax.twinx()
        lat_ax.plot(
            t,
            [w.get("p99_s") for w in windows],
            color=charts.PALETTE[5],
            marker="s",
            linestyle="--",
            label="p99 latency (s)",
        )
        lat_ax.set_ylabel("p99 latency (s)")
        lat_ax.grid(False)
        lines = rate_ax.get_legend_handles_labels()
        more = lat_ax.get_legend_handles_labels()
        rate_ax.legend(lines[0] + more[0], lines[1] + more[1], fontsize=8, loc="lower left")
        return charts.svg(fig, name, "Client success rate and latency across the roll")


def fleet_view(doc: dict[str, Any], name: str = "fleet") -> dict[str, Any]:
    members = as_dict(doc.get("members"))
    order = [m for m in doc.get("order") or [] if isinstance(m, str)]
    order += [m for m in members if m not in order]
    halted_at = [m for m in order if (members.get(m) or {}).get("phase") in ("failed", "interrupted")]
    load = as_dict(doc.get("load")) or None
    return {
        "doc": doc,
        "order": order,
        "canary": order[0] if order else None,
        "members": [(m, members.get(m) or {}) for m in order],
        "steps": STEPS,
        "halted_at": halted_at,
        "lanes": lanes_chart(doc, order, f"{name}-lanes"),
        "load": load,
        "load_chart": load_chart(load, f"{name}-load") if load else None,
    }
