"""Reading back state k26ctl wrote earlier, after someone or something may have changed it.

Session files, JSON Lines logs, run records, baselines and the deploy history on a host are read
as untrusted input: bounded and UTF-8 (`k26ctl.inputs`), JSON within `k26ctl.jsonsafe`'s limits
(strings encodable), then validated by pydantic against the type k26ctl reads it into (a pydantic
model, or the dataclass the state is kept in: pydantic checks each field's annotation).
Every defect becomes one line naming the file, the line or record, and the field:

    bisect log /s/default.log.jsonl:7: verdict: Input should be 'good', 'bad' or 'skip'

A whole-document reader (`read_document`) raises `BadStateError` (exit 78, with the caller's hint).
A JSON Lines reader (`parse_lines`) never stops at a bad record: it returns the records it could
read plus a `RecordProblem` for each one it could not, so a command can show the rest and then
decide: warn (history listings) or refuse with `Records.refuse` (a search must not resume from a
log it cannot fully trust, since a dropped verdict would be re-measured and a bad one believed).

New state (a watch state, say) reuses the pattern: a typed dataclass or pydantic model per record
kind, then `parse_lines(lines, where, shape_of)` or `read_document(path, Type, what=..., hint=...)`.
Keys the type does not name are ignored (a newer k26ctl may have written more).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Generic, TypeVar

from pydantic import TypeAdapter, ValidationError

from k26ctl import jsonsafe
from k26ctl.errors import ConfigError

T = TypeVar("T")

_VALUE_LIMIT = 120  # a field's message never echoes a long value


class BadStateError(ConfigError):
    """A state file k26ctl wrote earlier cannot be read back (exit 78, the project's bad-config code)."""


def _shown(where: str | Path) -> str:
    from k26ctl.termsafe import clean

    return clean(str(where), limit=300)


def field_problem(exc: ValidationError) -> tuple[str, str]:
    """(field, reason) of the first wrong field, the value not echoed; `+N more` when there are more."""
    from k26ctl.termsafe import clean

    errors = exc.errors(include_url=False, include_input=False)
    first = errors[0]
    loc = ".".join(str(part) for part in first["loc"])
    message = str(first["msg"]).removeprefix("Value error, ")
    if not loc:  # a check over the whole record names its field in the message: "field: reason"
        loc, _, message = message.partition(": ") if ": " in message else ("(record)", "", message)
    more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
    return clean(loc, limit=80), clean(message, limit=_VALUE_LIMIT) + more


@dataclass(frozen=True)
class RecordProblem:
    """One record that could not be read: `where` is `file:line`."""

    where: str
    field: str  # "" when the record is not JSON or not an object
    reason: str

    def one_line(self) -> str:
        return f"{self.where}: {self.field}: {self.reason}" if self.field else f"{self.where}: {self.reason}"


@dataclass
class Records(Generic[T]):
    """What `parse_lines` could read, in file order, and what it could not."""

    items: list[T] = field(default_factory=list)
    problems: list[RecordProblem] = field(default_factory=list)

    def error(self, what: str, hint: str) -> BadStateError | None:
        """One error for the first problem (counting the others), or None when every record read."""
        if not self.problems:
            return None
        more = len(self.problems) - 1
        suffix = f" (and {more} more unreadable record{'s' if more != 1 else ''})" if more else ""
        return BadStateError(f"{what} {self.problems[0].one_line()}{suffix}", hint)

    def refuse(self, what: str, hint: str) -> None:
        error = self.error(what, hint)
        if error is not None:
            raise error


@cache
def _adapter(shape: Any) -> TypeAdapter[Any]:
    return TypeAdapter(shape)


def validate(shape: type[T], data: Any) -> T:
    """`data` as `shape` (pydantic's ValidationError when it is not)."""
    adapter: TypeAdapter[T] = _adapter(shape)  # type: ignore[arg-type]  # classes are hashable
    return adapter.validate_python(data)


def parse_lines(
    lines: Iterable[str],
    where: str | Path,
    shape_of: Callable[[dict[str, Any]], type[T] | None],
    *,
    torn_tail: bool = False,
    prepare: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> Records[T]:
    """Each non-blank line as JSON, validated by the shape `shape_of(record)` picks (None: a record
    kind this version does not use, skipped). With `torn_tail`, an unparsable last line is a write cut
    short by a killed process and is dropped silently. `prepare` may fill in defaults before validation."""
    out: Records[T] = Records()
    shown = _shown(where)
    numbered = [(number, line) for number, line in enumerate(lines, 1) if line.strip()]
    for index, (number, line) in enumerate(numbered):
        try:
            data = jsonsafe.loads(line)
        except ValueError as exc:
            if torn_tail and index == len(numbered) - 1:
                break
            out.problems.append(RecordProblem(f"{shown}:{number}", "", str(exc)))
            continue
        if not isinstance(data, dict):
            kind = type(data).__name__ if data is not None else "null"
            out.problems.append(RecordProblem(f"{shown}:{number}", "", f"a JSON {kind}, not an object"))
            continue
        shape = shape_of(data)
        if shape is None:
            continue
        try:
            out.items.append(validate(shape, prepare(data) if prepare else data))
        except ValidationError as exc:
            name, reason = field_problem(exc)
            out.problems.append(RecordProblem(f"{shown}:{number}", name, reason))
    return out


def read_document(
    path: str | Path, shape: type[T], *, what: str, hint: str, max_bytes: int | None = None
) -> T:
    """The JSON file at `path` as `shape`; `BadStateError` (or inputs' ConfigError) naming file and field."""
    from k26ctl import inputs

    limit = inputs.MAX_DATA_BYTES if max_bytes is None else max_bytes
    text = inputs.read_text(path, what=what, max_bytes=limit, hint=hint)
    return parse_document(text, shape, what=what, where=path, hint=hint)


def parse_document(text: str | bytes, shape: type[T], *, what: str, where: str | Path, hint: str) -> T:
    try:
        data = jsonsafe.loads(text)
    except ValueError as exc:
        raise BadStateError(f"{what} {_shown(where)}: not readable ({exc})", hint) from None
    try:
        return validate(shape, data)
    except ValidationError as exc:
        name, reason = field_problem(exc)
        raise BadStateError(f"{what} {_shown(where)}: {name}: {reason}", hint) from None
