"""What a sweep found: the best point, every point, the Pareto front, the winner as a profile."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from k26ctl.documents import tagged
from k26ctl.profile import apply_overrides
from k26ctl.search.assignment import Assignment
from k26ctl.sweep.space import point_id
from k26ctl.sweep.state import Objective, PointRecord


def _tps(point: PointRecord, concurrency: int) -> float | None:
    level = point.level(concurrency)
    return level.output_tokens_per_s if level is not None and point.coherent else None


def pareto_front(points: Sequence[PointRecord], concurrency: int) -> list[PointRecord]:
    """Coherent points not beaten on both throughput (higher) and p99 ITL (lower) at `concurrency`."""
    measured = []
    for point in points:
        level = point.level(concurrency)
        if point.coherent and level is not None and level.itl_p99_ms is not None:
            measured.append((level.output_tokens_per_s, level.itl_p99_ms, point))
    front = []
    for tps, itl, point in measured:
        dominated = any(
            (t >= tps and i <= itl) and (t > tps or i < itl) for t, i, other in measured if other is not point
        )
        if not dominated:
            front.append((tps, point))
    return [p for _, p in sorted(front, key=lambda item: -item[0])]


@dataclass
class SweepResult:
    session: str
    status: str  # converged | budget
    objective: Objective
    points: list[PointRecord]
    best: PointRecord | None
    max_restarts: int

    @property
    def restarts(self) -> int:
        return sum(1 for p in self.points if p.restarted)

    def by_role(self, role: str) -> list[PointRecord]:
        return [p for p in self.points if p.role == role]

    def score(self, point: PointRecord | None) -> float | None:
        return _tps(point, self.objective.concurrency) if point is not None else None

    def _point_json(self, point: PointRecord) -> dict[str, Any]:
        target = point.level(self.objective.concurrency)
        evaluation = point.evaluation(self.objective)
        return {
            "number": point.number,
            "assignment": point.assignment,
            "role": point.role,
            "label": point.label,
            "coherent": point.coherent,
            "up": point.up,
            "feasible": evaluation.feasible if point.coherent else None,
            "restarted": point.restarted,
            "seconds": round(point.seconds, 2),
            "output_tokens_per_s": round(target.output_tokens_per_s, 3)
            if target and point.coherent
            else None,
            "accept_length": target.accept_length if target else None,
            "levels": [lv.to_json() for lv in point.levels],
            "detail": point.detail,
            "phases": point.phases,
        }

    def to_json(self) -> dict[str, Any]:
        best = None
        if self.best is not None:
            best = self._point_json(self.best)
        default = next(iter(self.by_role("default")), None)
        gains: dict[str, float | None] = {}
        best_score = self.score(self.best)
        for point in [*self.by_role("control"), *([default] if default else [])]:
            base = self.score(point)
            key = "default" if point.role == "default" else point.label
            gains[key] = round(best_score / base - 1.0, 4) if best_score and base else None
        return tagged(
            "sweep",
            {
                "session": self.session,
                "status": self.status,
                "objective": {"description": self.objective.describe(), **self.objective.__dict__},
                "best": best,
                "gain_over": gains,
                "points": [self._point_json(p) for p in self.points],
                "pareto": [p.number for p in pareto_front(self.points, self.objective.concurrency)],
                "restarts": self.restarts,
                "max_restarts": self.max_restarts,
                "seconds": round(sum(p.seconds for p in self.points), 2),
            },
        )


def winner_profile(original: str, sets: Sequence[str], assignment: Assignment, name: str | None) -> str:
    """YAML of a profile that extends the original with the winner's values (and the sweep's --set)."""
    overrides = [*sets, *(f"{k}={json.dumps(v)}" for k, v in sorted(assignment.items()))]
    data = apply_overrides({}, overrides) if overrides else {}
    described = ", ".join(f"{k}={json.dumps(v)}" for k, v in sorted(assignment.items())) or "no change"
    document: dict[str, Any] = {"extends": original}
    if name:
        document["name"] = name
    document["description"] = f"k26ctl sweep winner: {described}"
    document.update({k: v for k, v in data.items() if k not in ("extends", "name", "description")})
    return yaml.safe_dump(document, sort_keys=False)


def write_winner(
    path: Path, original: str, sets: Sequence[str], assignment: Assignment, name: str | None
) -> None:
    target = Path(original)
    try:
        extends = str(target.resolve().relative_to(path.resolve().parent))
    except ValueError:
        extends = str(target.resolve())
    path.write_text(winner_profile(extends, sets, assignment, name), encoding="utf-8")


def same_point(a: Assignment, b: Assignment) -> bool:
    return point_id(a) == point_id(b)
