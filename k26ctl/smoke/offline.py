"""Offline scoring of saved outputs (`k26ctl score`): JSON Lines in, one verdict per line out."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from k26ctl.errors import ConfigError
from k26ctl.smoke.detectors import TextVerdict, score_text


@dataclass(frozen=True)
class ScoredLine:
    line: int
    verdict: TextVerdict
    record: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        data = {"line": self.line, **self.verdict.to_json()}
        for key in ("id", "label"):
            if key in self.record:
                data[key] = self.record[key]
        return data


def score_lines(lines: Iterable[str], where: str = "input") -> list[ScoredLine]:
    """Score each JSON object with a `text` (optional `prompt`, `kind`, `finish_reason`); blank lines
    are skipped. A line that is not such an object is a config error naming the line."""
    scored: list[ScoredLine] = []
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{where}:{number}: not JSON ({exc.msg})", "one JSON object per line") from None
        if not isinstance(record, dict) or not isinstance(record.get("text"), str):
            raise ConfigError(
                f"{where}:{number}: needs a string field 'text'", 'e.g. {"text": "...", "kind": "prose"}'
            )
        optional = {k: record.get(k) for k in ("prompt", "kind", "finish_reason")}
        for key, value in optional.items():
            if value is not None and not isinstance(value, str):
                raise ConfigError(f"{where}:{number}: '{key}' must be a string")
        verdict = score_text(record["text"], **optional)
        scored.append(ScoredLine(number, verdict, record))
    return scored


def score_file(path: str) -> list[ScoredLine]:
    """Score a JSON Lines file; '-' reads standard input."""
    if path == "-":
        return score_lines(sys.stdin, "<stdin>")
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            f"cannot read {path}: {exc.strerror or exc}", "give a JSON Lines file or '-'"
        ) from None
    return score_lines(text.splitlines(), path)
