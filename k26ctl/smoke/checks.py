"""Prompt-aware checks: does the answer do what this particular prompt asked?"""

from __future__ import annotations

import ast
import dataclasses
import json
import re
from typing import Any

from k26ctl.smoke.detectors import Finding
from k26ctl.smoke.structured import json_schema_findings, tool_call_findings
from k26ctl.smoke.suite import STRUCTURED_CHECKS, Expectation, PromptSpec

_FENCE = re.compile(r"```[A-Za-z0-9_+-]*[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)


def extract_block(text: str) -> str:
    """The first fenced code block if there is one, else the whole text."""
    match = _FENCE.search(text)
    return match.group(1) if match else text.strip()


def _finding(check: Expectation, message: str, span: tuple[int, int] = (0, 0), excerpt: str = "") -> Finding:
    return Finding(
        detector=f"expect.{check.type}",
        score=0.0,
        threshold=1.0,
        span=span,
        excerpt=excerpt,
        message=message,
        severity=check.severity,
    )


def _number_text(text: str) -> str:
    return re.sub(r"(?<=\d),(?=\d{3}\b)", "", text)


def run_check(check: Expectation, text: str, completion_tokens: int | None = None) -> Finding | None:
    """None when the check passes, else a finding saying what was expected."""
    value = check.value or ""
    if check.type == "contains":
        if value.lower() not in text.lower():
            return _finding(check, f"expected the answer to mention {value!r}")
    elif check.type == "not_contains":
        index = text.lower().find(value.lower())
        if index >= 0:
            return _finding(
                check, f"the answer must not contain {value!r}", (index, index + len(value)), value
            )
    elif check.type == "regex":
        if not re.search(value, text, re.DOTALL):
            return _finding(check, f"the answer does not match /{value}/")
    elif check.type == "answer":
        pattern = rf"(?<![\w.]){re.escape(_number_text(value))}(?![\w]|\.\d)"
        if not re.search(pattern, _number_text(text), re.IGNORECASE):
            return _finding(check, f"expected the answer {value!r}")
    elif check.type == "json":
        block = extract_block(text)
        try:
            json.loads(block)
        except json.JSONDecodeError as exc:
            return _finding(
                check,
                f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
                (exc.pos, exc.pos + 1),
                block[max(0, exc.pos - 20) : exc.pos + 20],
            )
        except (ValueError, RecursionError) as exc:  # 5,000-digit numbers, nesting past the recursion limit
            return _finding(check, f"not usable JSON: {_limit_reason(exc)}")
    elif check.type == "python":
        block = extract_block(text)
        try:
            ast.parse(block)
        except SyntaxError as exc:
            return _finding(
                check, f"not valid Python: {exc.msg} (line {exc.lineno})", excerpt=(exc.text or "").strip()
            )
        except (ValueError, UnicodeError, MemoryError, RecursionError) as exc:
            # NUL bytes, lone surrogates, or nesting so deep the parser gives up (100,000 '-' in a row)
            return _finding(check, f"not valid Python: {_limit_reason(exc)}")
    elif check.type == "repeats":
        found = len(re.findall(rf"(?<!\w){re.escape(value)}(?!\w)", text, re.IGNORECASE))
        if found != check.count:
            return _finding(check, f"expected {value!r} exactly {check.count} times, found {found}")
    elif check.type == "min_tokens":
        produced, wanted = completion_tokens, check.count or 0
        if produced is not None and produced < wanted:
            return _finding(check, f"only {produced} tokens generated, expected at least {wanted}")
    return None


def _limit_reason(exc: BaseException) -> str:
    if isinstance(exc, (MemoryError, RecursionError)):
        return "nested too deeply to parse"
    return str(exc)[:120] or type(exc).__name__


def run_checks(checks: list[Expectation], text: str, completion_tokens: int | None = None) -> list[Finding]:
    """The text checks; the structured ones (tool_call, json_schema) need the whole answer:
    `structured_checks`."""
    return [
        f
        for f in (run_check(c, text, completion_tokens) for c in checks if c.type not in STRUCTURED_CHECKS)
        if f is not None
    ]


def structured_checks(
    prompt: PromptSpec, text: str, tool_calls: list[Any] | None, finish_reason: str | None = None
) -> list[Finding]:
    """The prompt's tool_call and json_schema expectations against the answer (content and the parsed
    `message.tool_calls`). A server without a tool-call parser is never asked a tool-call prompt: the
    runner skips those with a named reason (`tool_call_skipped`)."""
    findings: list[Finding] = []
    for check in prompt.expect:
        if check.type == "tool_call":
            declared = {tool.name: tool.parameters for tool in prompt.tools or []}
            found = tool_call_findings(tool_calls, declared, text, check.value, finish_reason)
        elif check.type == "json_schema" and prompt.schema_ is not None:
            found = json_schema_findings(extract_block(text), prompt.schema_)
        else:
            continue
        findings += [dataclasses.replace(f, severity=check.severity) for f in found]
    return findings
