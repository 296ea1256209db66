"""JSON from untrusted sources (server answers, JSON Lines files, logs) with limits.

`json.loads` alone raises RecursionError on deep nesting and ValueError past 4300-digit integers,
and turns `1e999` into infinity. `loads` turns each of these into one `JSONRefused` (a ValueError)
with a short reason, so a caller reports it as bad input instead of a traceback.

It is also where foreign text is made encodable: JSON may escape a lone UTF-16 surrogate
(`"\\ud800"`), which Python decodes into a `str` that cannot be encoded again (every later
`.encode()`, write or regex over bytes fails). Every string in the parsed document, keys included,
has such code points replaced by U+FFFD before anyone else sees it; `decode` also says how many
were replaced, for callers that treat a source emitting them as suspect (smoke).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

MAX_DEPTH = 64  # real answers and records nest a handful of levels
MAX_NUMBER_CHARS = 64


class JSONRefused(ValueError):
    """Not JSON, or JSON beyond the limits (depth, number size, non-finite numbers)."""


def _parse_int(text: str) -> int:
    if len(text) > MAX_NUMBER_CHARS:
        raise JSONRefused(f"number with {len(text)} digits (limit {MAX_NUMBER_CHARS})")
    return int(text)


def _parse_float(text: str) -> float:
    if len(text) > MAX_NUMBER_CHARS:
        raise JSONRefused(f"number with {len(text)} characters (limit {MAX_NUMBER_CHARS})")
    value = float(text)
    if not math.isfinite(value):
        raise JSONRefused(f"number {text[:20]} is out of range")
    return value


def _parse_constant(name: str) -> float:
    raise JSONRefused(f"{name} is not JSON")


def depth(value: Any, limit: int = MAX_DEPTH) -> int:
    """Nesting depth of a parsed document, counting stops just past `limit`."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, (dict, list)):
            deepest = max(deepest, level)
            if deepest > limit:
                return deepest
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, level + 1) for child in children)
    return deepest


REPLACEMENT = "\ufffd"
_SURROGATE = re.compile("[\ud800-\udfff]")
# A surrogate escape in JSON text: only these can put a surrogate into a document parsed from bytes.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def encodable(text: str) -> tuple[str, int]:
    """`text` with every lone surrogate replaced by U+FFFD, and how many were replaced.

    For strings from outside that did not pass through `loads` (a `surrogateescape`d environment
    value shown as text, a parsed YAML escape)."""
    replaced, count = _SURROGATE.subn(REPLACEMENT, text)
    return replaced, count


def _encodable_tree(value: Any) -> tuple[Any, int]:
    if isinstance(value, str):
        return encodable(value)
    if isinstance(value, list):
        total = 0
        for index, item in enumerate(value):
            value[index], count = _encodable_tree(item)
            total += count
        return value, total
    if isinstance(value, dict):
        total = 0
        for key in list(value):
            item, count = _encodable_tree(value[key])
            total += count
            new_key, key_count = encodable(key) if isinstance(key, str) else (key, 0)
            if key_count:
                del value[key]
                value.setdefault(new_key, item)  # two keys that differ only in surrogates: first wins
                total += key_count
            else:
                value[key] = item
        return value, total
    return value, 0


@dataclass(frozen=True)
class Decoded:
    value: Any
    surrogates_replaced: int = 0


def loads(data: bytes | str, *, max_depth: int = MAX_DEPTH) -> Any:
    """The parsed document, every string in it encodable; `JSONRefused` when it is not acceptable."""
    return decode(data, max_depth=max_depth).value


def decode(data: bytes | str, *, max_depth: int = MAX_DEPTH) -> Decoded:
    """`loads`, and how many lone surrogates were replaced in the document's strings."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise JSONRefused(f"not UTF-8 (byte {exc.start})") from None
    try:
        value = json.loads(
            data, parse_int=_parse_int, parse_float=_parse_float, parse_constant=_parse_constant
        )
    except RecursionError:
        raise JSONRefused(f"nested deeper than {max_depth} levels") from None
    except json.JSONDecodeError as exc:
        raise JSONRefused(f"not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except JSONRefused:
        raise
    except ValueError as exc:
        raise JSONRefused(str(exc)) from None
    # each level opens a bracket: a document with no more brackets than the limit is not walked
    if data.count("{") + data.count("[") > max_depth and depth(value, max_depth) > max_depth:
        raise JSONRefused(f"nested deeper than {max_depth} levels")
    if not _SURROGATE_ESCAPE.search(data) and not _SURROGATE.search(data):
        return Decoded(value)
    value, replaced = _encodable_tree(value)
    return Decoded(value, replaced)
