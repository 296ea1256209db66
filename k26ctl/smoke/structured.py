"""Structured output: JSON answers against a schema, and tool calls as SGLang's tool-call parser returns them.

The schemas are the suites' own, in the subset of JSON Schema they use: `type` (one name or a list),
`properties`, `required`, `additionalProperties: false`, `enum`, `items`, `minItems`/`maxItems`,
`minimum`/`maximum`. A keyword outside that subset is refused when the suite loads (`unsupported`), so
a schema is never judged by rules nobody wrote.

A tool call is judged as a client would use it: the response carries `message.tool_calls`, every call
names a function the request declared, and its `function.arguments` is a JSON object that validates
against that function's `parameters`. Each finding is one line naming the call and what is wrong.
"""

from __future__ import annotations

import json
import math
from typing import Any

from k26ctl.smoke.finding import Finding, excerpt

KEYWORDS = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "enum",
        "items",
        "minItems",
        "maxItems",
        "minimum",
        "maximum",
        "description",
        "title",
    }
)
_TYPES = ("object", "array", "string", "integer", "number", "boolean", "null")


def unsupported(schema: Any, where: str = "schema") -> str | None:
    """Why `schema` is outside the subset this validator implements (None: inside it)."""
    if not isinstance(schema, dict):
        return f"{where}: a schema must be a mapping"
    extra = sorted(set(schema) - KEYWORDS)
    if extra:
        return f"{where}: unsupported keyword {extra[0]!r} (supported: {', '.join(sorted(KEYWORDS))})"
    types = schema.get("type")
    names = types if isinstance(types, list) else [types] if types is not None else []
    for name in names:
        if name not in _TYPES:
            return f"{where}.type: unknown type {name!r}"
    for key, sub in (schema.get("properties") or {}).items():
        problem = unsupported(sub, f"{where}.properties.{key}")
        if problem:
            return problem
    if "items" in schema:
        return unsupported(schema["items"], f"{where}.items")
    return None


def _type_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if math.isfinite(value) and value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, dict) else type(value).__name__


def _type_ok(value: Any, wanted: str) -> bool:
    actual = _type_of(value)
    return actual == wanted or (wanted == "number" and actual == "integer")


def schema_problem(value: Any, schema: dict[str, Any], path: str = "$") -> str | None:
    """The first way `value` breaks `schema` ("$.city: 'Pariss' is not one of ['Paris', ...]"), or None."""
    types = schema.get("type")
    if types is not None:
        names = types if isinstance(types, list) else [types]
        if not any(_type_ok(value, t) for t in names):
            return f"{path}: expected {' or '.join(names)}, got {_type_of(value)}"
    if "enum" in schema and value not in schema["enum"]:
        return f"{path}: {_shown(value)} is not one of {schema['enum']}"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            return f"{path}: {value} is below the minimum {schema['minimum']}"
        if "maximum" in schema and value > schema["maximum"]:
            return f"{path}: {value} is above the maximum {schema['maximum']}"
    if isinstance(value, dict):
        return _object_problem(value, schema, path)
    if isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            return f"{path}: {len(value)} items, at least {schema['minItems']} required"
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            return f"{path}: {len(value)} items, at most {schema['maxItems']} allowed"
        if isinstance(schema.get("items"), dict):
            for i, item in enumerate(value):
                problem = schema_problem(item, schema["items"], f"{path}[{i}]")
                if problem:
                    return problem
    return None


def _object_problem(value: dict[str, Any], schema: dict[str, Any], path: str) -> str | None:
    properties: dict[str, Any] = schema.get("properties") or {}
    missing = [key for key in schema.get("required") or [] if key not in value]
    if missing:
        return f"{path}: missing required property {missing[0]!r}"
    if schema.get("additionalProperties") is False:
        extra = [key for key in value if key not in properties]
        if extra:
            return f"{path}: unexpected property {extra[0]!r}"
    for key, sub in properties.items():
        if key in value:
            problem = schema_problem(value[key], sub, f"{path}.{key}")
            if problem:
                return problem
    return None


def _shown(value: Any, limit: int = 40) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _finding(detector: str, message: str, shown: str = "") -> Finding:
    return Finding(detector, 0.0, 1.0, (0, 0), excerpt(shown, 0, len(shown)), message)


def parse_json(text: str) -> tuple[Any, str | None]:
    """(value, None), or (None, why the text is not JSON) in one line."""
    try:
        return json.loads(text), None
    except json.JSONDecodeError as exc:
        return None, f"{exc.msg} at line {exc.lineno} column {exc.colno}"
    except (ValueError, RecursionError) as exc:  # 5,000-digit numbers, nesting past the recursion limit
        return None, str(exc)[:120] or type(exc).__name__


def json_schema_findings(block: str, schema: dict[str, Any]) -> list[Finding]:
    """The answer (or its first fenced block, already cut out) parses as JSON and fits `schema`."""
    value, problem = parse_json(block)
    if problem is not None:
        return [_finding("json_schema", f"the answer is not JSON: {problem}", block[:60])]
    problem = schema_problem(value, schema)
    if problem is not None:
        return [_finding("json_schema", f"the answer does not fit its schema: {problem}", block[:60])]
    return []


def _arguments_text(function: dict[str, Any]) -> tuple[str | None, Any]:
    """SGLang sends arguments as a JSON string (protocol.py FunctionResponse allows a mapping too)."""
    raw = function.get("arguments")
    if isinstance(raw, dict):
        return None, raw
    return (raw if isinstance(raw, str) else None), None


def tool_call_findings(
    tool_calls: list[Any] | None,
    tools: dict[str, dict[str, Any]],
    content: str,
    expected: str | None = None,
    finish_reason: str | None = None,
) -> list[Finding]:
    """Judge the tool calls of one answer against the declared `tools` (name -> parameters schema).

    `expected` names the function the prompt asks for, when it asks for one. `tool_calls` None means
    the server's parser found no call section; an empty list, a section in which no call parses (a call
    that never reaches its end marker, as SGLang's kimi_k2 parser reads it)."""
    if not tool_calls:
        what = "message.tool_calls is empty" if tool_calls is not None else "no message.tool_calls"
        if tool_calls is not None:
            what += ": a call section began but no complete call parsed"
        if finish_reason == "length":
            what += "; the answer ran to its token limit"
        if "tool_call" in content:
            what += "; the content holds raw call text"
        return [_finding("tool_call", f"no tool call parsed ({what})", content[:60])]
    findings: list[Finding] = []
    for i, call in enumerate(tool_calls):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            findings.append(_finding("tool_call", f"tool call {i} has no function object", _shown(call)))
            continue
        name = function.get("name")
        if not isinstance(name, str) or name not in tools:
            declared = ", ".join(sorted(tools))
            findings.append(
                _finding(
                    "tool_call_name",
                    f"tool call {i} names {_shown(name)}, which the request did not declare ({declared})",
                )
            )
            continue
        text, value = _arguments_text(function)
        if value is None:
            if text is None:
                findings.append(_finding("tool_call_arguments", f"arguments of {name} are not a string"))
                continue
            value, problem = parse_json(text)
            if problem is not None:
                findings.append(
                    _finding(
                        "tool_call_arguments",
                        f"arguments of {name} are not JSON: {_shown(text, 60)} ({problem})",
                        text[:60],
                    )
                )
                continue
        problem = schema_problem(value, tools[name] or {"type": "object"})
        if problem is not None:
            findings.append(
                _finding("tool_call_arguments", f"arguments of {name} do not fit its parameters: {problem}")
            )
    names = [
        c["function"].get("name")
        for c in tool_calls
        if isinstance(c, dict) and isinstance(c.get("function"), dict)
    ]
    if expected is not None and expected not in names:
        findings.append(
            _finding(
                "tool_call_name", f"expected a call of {expected}, got {', '.join(map(str, names)) or 'none'}"
            )
        )
    return findings
