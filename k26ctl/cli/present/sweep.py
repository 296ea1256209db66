"""Terminal output of `k26ctl sweep`: progress lines, the table of points and the Pareto front."""

from __future__ import annotations

import json
import sys
from typing import Any

from k26ctl.sweep.result import SweepResult, pareto_front
from k26ctl.sweep.search import NextPoint
from k26ctl.sweep.state import Objective, PointRecord


def compact(point: PointRecord) -> str:
    """A point as its keys' last parts (budget=16 max_topk=4), or its control/default label."""
    if point.role != "search" and point.role != "grid":
        return point.label
    return " ".join(f"{k.rsplit('.', 1)[-1]}={json.dumps(v)}" for k, v in sorted(point.assignment.items()))


def _f(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


class SweepProgress:
    """One line per point on stderr, so --json stdout stays clean."""

    def note(self, message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    def deploy_event(self, event: Any) -> None:
        pass

    def started(self, number: int, point: NextPoint, restarts: int, max_restarts: int) -> None:
        print(
            f"point {number} ({point.role}, restarts {restarts}/{max_restarts}): {point.why}", file=sys.stderr
        )

    def finished(self, record: PointRecord, objective: Objective) -> None:
        level = record.level(objective.concurrency)
        if not record.coherent:
            state = "INCOHERENT (not measured)" if record.up else "did not come up"
            print(f"  -> {state}: {record.detail[:160]}", file=sys.stderr, flush=True)
            return
        tps = _f(level.output_tokens_per_s if level else None)
        accept = _f(level.accept_length if level else None, 2)
        print(
            f"  -> {tps} tok/s at c{objective.concurrency}, accept {accept}, {record.seconds:.0f} s",
            file=sys.stderr,
            flush=True,
        )


def render_table(result: SweepResult) -> None:
    from rich.table import Table

    from k26ctl.cli.common import stdout_console

    concurrency = sorted({lv.concurrency for p in result.points for lv in p.levels})
    target = result.objective.concurrency
    front = {p.number for p in pareto_front(result.points, target)}
    table = Table(title=f"sweep {result.session}: {result.objective.describe()}")
    for column in ("#", "point", "coherent"):
        table.add_column(column)
    for c in concurrency:
        table.add_column(f"tok/s c{c}", justify="right")
    for column in (f"accept c{target}", f"p99 TTFT c{target}", f"p99 ITL c{target}", "pareto"):
        table.add_column(column, justify="right")
    for point in result.points:
        level = point.level(target)
        mark = "best" if result.best is not None and point.number == result.best.number else ""
        table.add_row(
            str(point.number),
            compact(point),
            "yes" if point.coherent else ("NO" if point.up else "down"),
            *[
                _f(lv.output_tokens_per_s) if (lv := point.level(c)) and point.coherent else "-"
                for c in concurrency
            ],
            _f(level.accept_length if level else None, 2),
            _f(level.ttft_p99_ms if level else None, 0),
            _f(level.itl_p99_ms if level else None, 0),
            ("*" if point.number in front else "") + (f" {mark}" if mark else ""),
        )
    console = stdout_console()
    if not console.is_terminal:
        console.width = 160
    console.print(table)
    doc = result.to_json()
    if result.best is None:
        console.print("no coherent point met the objective")
    else:
        gains = ", ".join(
            f"{name} {'+' if g >= 0 else ''}{100 * g:.1f} %"
            for name, g in doc["gain_over"].items()
            if g is not None
        )
        console.print(
            f"best: {compact(result.best)} ({_f(result.score(result.best))} tok/s at c{target}); "
            f"gain over {gains or 'n/a'}"
        )
    console.print(
        f"{len(result.points)} points, {result.restarts} restarts (at most {result.max_restarts}), "
        f"status {result.status}; '*' marks the Pareto front (throughput vs p99 ITL at c{target})"
    )
