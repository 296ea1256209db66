"""Offline scoring of saved outputs (`k26ctl score`): JSON Lines in, one verdict per line out.

Records are read and scored as a stream (`iter_scored`), so the first verdicts print while the
rest of a large file is still unread; a long input is scored on every core (smoke.batch), which reads
a bounded number of records ahead. Lines are split on "\\n" only:
a raw U+2028 inside a JSON string is valid JSON Lines. Each line is at most 16 MB, JSON within the
`jsonsafe` limits; anything else is a ConfigError naming the line.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

from k26ctl import inputs
from k26ctl.errors import ConfigError
from k26ctl.jsonsafe import JSONRefused, loads
from k26ctl.smoke.batch import Request, score_many
from k26ctl.smoke.detectors import TextVerdict


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


def _parse_record(number: int, raw: str, where: str) -> tuple[int, dict[str, Any], Request] | None:
    if not raw.strip():
        return None
    try:
        record = loads(raw)
    except JSONRefused as exc:
        raise ConfigError(f"{where}:{number}: {exc}", "one JSON object per line") from None
    if not isinstance(record, dict) or not isinstance(record.get("text"), str):
        raise ConfigError(
            f"{where}:{number}: needs a string field 'text'", 'e.g. {"text": "...", "kind": "prose"}'
        )
    optional = {k: record.get(k) for k in ("prompt", "kind", "finish_reason")}
    for key, value in optional.items():
        if value is not None and not isinstance(value, str):
            raise ConfigError(f"{where}:{number}: '{key}' must be a string")
    return number, record, Request(record["text"], **optional)


def _score_numbered(numbered: Iterable[tuple[int, str]], where: str) -> Iterator[ScoredLine]:
    parsed = (_parse_record(number, raw, where) for number, raw in numbered)
    records, requests = itertools.tee(item for item in parsed if item is not None)
    verdicts = score_many(request for _number, _record, request in requests)
    for (number, record, _request), verdict in zip(records, verdicts, strict=True):
        yield ScoredLine(number, verdict, record)


def score_lines(lines: Iterable[str], where: str = "input") -> list[ScoredLine]:
    """Score each JSON object with a `text` (optional `prompt`, `kind`, `finish_reason`); blank lines
    are skipped. A line that is not such an object is a config error naming the line."""
    return list(_score_numbered(enumerate(lines, start=1), where))


def iter_scored(stream: BinaryIO, where: str) -> Iterator[ScoredLine]:
    """Score a binary JSON Lines stream in order, yielding as records are scored."""
    yield from _score_numbered(inputs.iter_lines(stream, what="score input", where=where), where)


# A saved-output file may be large; it is streamed, so the cap only stops runaway inputs.
MAX_SCORE_BYTES = 1 << 40


def iter_score_file(path: str) -> Iterator[ScoredLine]:
    """Score a JSON Lines file ('-' reads standard input), yielding as it reads."""
    if path == "-":
        yield from iter_scored(sys.stdin.buffer, "<stdin>")
        return
    hint = "give a JSON Lines file or '-'"
    with inputs.open_regular(path, what="score input", max_bytes=MAX_SCORE_BYTES, hint=hint) as stream:
        yield from iter_scored(stream, path)


def score_file(path: str) -> list[ScoredLine]:
    return list(iter_score_file(path))
