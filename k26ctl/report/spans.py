"""An answer cut into pieces at its findings' spans, so the page can mark each flagged run of text."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

# Findings whose span is not a character range of the answer text: token positions (the probes) or
# nothing at all (a missing word, an accept-length figure).
NOT_TEXT_SPANS = frozenset({"self_consistency"})
REASONING_PREFIX = "reasoning."


@dataclass
class Piece:
    text: str
    marks: list[int] = field(default_factory=list)  # numbers of the findings covering this piece


def finding_field(finding: dict[str, Any]) -> str | None:
    """Which text a finding's span points into: 'text', 'reasoning', or None (not a text span)."""
    span = finding.get("span")
    detector = str(finding.get("detector", ""))
    if detector in NOT_TEXT_SPANS or not isinstance(span, list) or len(span) != 2:
        return None
    start, end = span
    if not isinstance(start, int) or not isinstance(end, int) or end <= start:
        return None
    return "reasoning" if detector.startswith(REASONING_PREFIX) else "text"


def pieces(text: str, spans: list[tuple[int, int, int]]) -> list[Piece]:
    """Cut `text` at every span boundary; `spans` are (start, end, finding number), clamped to the text.
    Overlapping spans give pieces carrying every finding that covers them."""
    size = len(text)
    clamped = [(max(0, min(s, size)), max(0, min(e, size)), n) for s, e, n in spans]
    clamped = [(s, e, n) for s, e, n in clamped if e > s]
    cuts = sorted({0, size, *(s for s, _, _ in clamped), *(e for _, e, _ in clamped)})
    out: list[Piece] = []
    for start, end in itertools.pairwise(cuts):
        marks = [n for s, e, n in clamped if s <= start and end <= e]
        if out and out[-1].marks == marks:
            out[-1].text += text[start:end]
        else:
            out.append(Piece(text[start:end], marks))
    return out
