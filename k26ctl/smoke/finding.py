"""A detector's result: one named problem with its score, threshold and span."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

Severity = Literal["fail", "warn"]


@dataclass(frozen=True)
class Finding:
    """One named problem. `score` is what was measured and `threshold` the limit it crossed (upwards
    for counts, runs and ratios; downwards for shares such as the letter share of symbol soup).
    `span` is [start, end) in the scored text; `severity` 'warn' findings never fail a text."""

    detector: str
    score: float
    threshold: float
    span: tuple[int, int]
    excerpt: str
    message: str
    severity: Severity = "fail"

    def reason(self) -> str:
        return f"{self.detector}: {self.message}"

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["span"] = list(self.span)
        return data


def excerpt(text: str, start: int, end: int, limit: int = 60) -> str:
    """text[start:end], cut to `limit` characters with "..." when longer: what a finding shows."""
    piece = text[start:end]
    return piece if len(piece) <= limit else piece[: limit - 3] + "..."
