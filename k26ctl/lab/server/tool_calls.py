"""The lab's tool-call parser: the Kimi K2 format, parsed as SGLang's `kimi_k2` parser does (non-streamed).

Facts from SGLang 0.5.15 (function_call/kimik2_detector.py, entrypoints/openai/serving_chat.py):
- a call section starts with `<|tool_calls_section_begin|>`; without it the text is plain content;
- each call is `<|tool_call_begin|>ID<|tool_call_argument_begin|>{...}<|tool_call_end|>`, the
  arguments being whatever stands between the first `{` and the nearest `}` before the end marker
  (not parsed as JSON: broken arguments are passed on as they are);
- ID is `functions.NAME:N` or `NAME:N`; a bare counter `N` names the only declared tool, or the one
  whose parameter names best match the argument keys; a call whose name cannot be found is dropped;
- the content is the text before the section; calls get the ids `functions.NAME:I` (I counting the
  calls of this answer from 0) and `index` I; a `stop` finish becomes `tool_calls`.
tests/lab_server/test_tool_calls.py checks this parser against the real one where a release is installed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

SECTION_BEGIN = "<|tool_calls_section_begin|>"
PARSERS = ("kimi_k2",)  # the --tool-call-parser names the lab implements

_CALL = re.compile(
    r"<\|tool_call_begin\|>\s*(?P<id>[^\s<|]+)\s*<\|tool_call_argument_begin\|>\s*"
    r"(?P<arguments>\{.*?\})\s*<\|tool_call_end\|>",
    re.DOTALL,
)
_NAMED_ID = re.compile(r"^(?:functions\.)?(?P<name>[\w.\-]+):(?P<index>\d+)$")
_COUNTER_ID = re.compile(r"^\d+$")


@dataclass(frozen=True)
class ParsedCall:
    name: str
    arguments: str


def _properties(tool: dict[str, Any]) -> set[str]:
    function = tool.get("function") or {}
    return set(((function.get("parameters") or {}).get("properties") or {}).keys())


def _tool_name(tool: dict[str, Any]) -> str | None:
    name = (tool.get("function") or {}).get("name")
    return name if isinstance(name, str) else None


def _guess_name(tools: list[dict[str, Any]], arguments: str) -> str | None:
    if len(tools) == 1:
        return _tool_name(tools[0])
    try:
        keys = set(json.loads(arguments))
    except (ValueError, TypeError):
        return None
    best, best_score = None, -1
    for tool in tools:
        props = _properties(tool)
        if not props:
            continue
        score = len(keys & props) - len(keys - props)
        if score > best_score:
            best, best_score = _tool_name(tool), score
    return best


def parse(text: str, tools: list[dict[str, Any]]) -> tuple[str, list[ParsedCall]] | None:
    """(content, calls) when `text` holds a call section, else None (the text is plain content)."""
    if SECTION_BEGIN not in text:
        return None
    calls: list[ParsedCall] = []
    for match in _CALL.finditer(text):
        call_id, arguments = match.group("id"), match.group("arguments")
        named = _NAMED_ID.match(call_id)
        if named:
            name: str | None = named.group("name")
        elif _COUNTER_ID.match(call_id):
            name = _guess_name(tools, arguments)
        else:
            name = None
        if name is not None:
            calls.append(ParsedCall(name, arguments))
    return text[: text.find(SECTION_BEGIN)], calls


def message_fields(
    text: str, tools: list[dict[str, Any]], finish_reason: str | None
) -> tuple[str, list[dict[str, Any]] | None, str | None]:
    """(content, tool_calls, finish_reason) of a chat message the way SGLang's serving_chat builds them."""
    parsed = parse(text, tools)
    if parsed is None:
        return text, None, finish_reason
    content, calls = parsed
    tool_calls = [
        {
            "id": f"functions.{call.name}:{i}",
            "index": i,
            "type": "function",
            "function": {"name": call.name, "arguments": call.arguments},
        }
        for i, call in enumerate(calls)
    ]
    return content, tool_calls, "tool_calls" if finish_reason == "stop" else finish_reason
