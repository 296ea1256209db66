"""Family `structure`: structured output (JSON, templates) whose structure breaks.

- broken_json: a JSON answer whose structure breaks before its end;
- empty_slots: the same frame written again and again with nothing in its slots;
- repeated_key: one JSON key written again and again in one object.

A new detector belongs here when it parses the text's structure (brackets, keys, slots).
"""

from __future__ import annotations

import json
import re
from collections import Counter

from k26ctl.smoke.finding import Finding, excerpt
from k26ctl.smoke.kinds import KindProfile

# A label whose value is missing: "second item:., third item:.," (a template filled with nothing)
_EMPTY_SLOT = re.compile(r"(?<=\w)[ \t]*:[ \t]*[.,;](?=\s|[.,;]|$)")
_SLOT_HINT = re.compile(r":[ \t]*[.,;]")  # what every empty slot holds


def detect_empty_slots(text: str, profile: KindProfile) -> list[Finding]:
    """A broken template: the same frame written again and again with nothing in its slots."""
    if not profile.check_content:
        return []
    if not _SLOT_HINT.search(text):
        return []  # (the look-behind pattern is tried at every position; this one jumps to colons)
    slots = list(_EMPTY_SLOT.finditer(text))
    if len(slots) < 3:
        return []
    start, end = slots[0].start(), slots[-1].end()
    return [
        Finding(
            "empty_slots",
            float(len(slots)),
            3.0,
            (start, end),
            excerpt(text, max(0, start - 20), end),
            f"{len(slots)} labels with nothing after them (a template left unfilled)",
        )
    ]


_JSON_FENCE = re.compile(r"```(?:json)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)


def detect_broken_json(text: str, profile: KindProfile, finish_reason: str | None = None) -> list[Finding]:
    """A JSON answer whose structure breaks before its end (keys without values, a lost brace).
    A document cut at the token limit fails only at its very end and is not reported, unless the
    model said it was done (finish_reason 'stop', or it closed the code fence around the document);
    JSON followed by prose is fine."""
    if profile.name != "json":
        return []
    stripped = text.strip()
    fence = _JSON_FENCE.match(stripped)
    block = (fence.group(1) if fence else stripped).rstrip()
    base = text.find(block) if block else 0
    if not block.startswith(("{", "[")):
        return []
    try:
        json.loads(block)
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data":
            return []
        truncated = exc.pos >= len(block) or exc.msg.startswith("Unterminated string")
        fence_closed = fence is not None and fence.group().endswith("```") and len(fence.group()) > 6
        if truncated and finish_reason != "stop" and not fence_closed:
            return []
        where = base + exc.pos
        return [
            Finding(
                "broken_json",
                float(exc.pos),
                float(len(block)),
                (where, min(len(text), where + 1)),
                excerpt(text, max(0, where - 30), where + 30),
                f"JSON breaks at line {exc.lineno} column {exc.colno}: {exc.msg}",
            )
        ]
    return []


# A key at the start of an object member: after "{" or ",", a quoted name and a colon.
_KEY = re.compile(r'[{,]\s*"((?:[^"\\\n]|\\.){1,80})"\s*:')
REPEATED_KEY = 3  # the same key this many times in one object, with no other key at its level between


def detect_repeated_key(text: str) -> list[Finding]:
    """One object writes the same key three or more times. Keys are tracked per nesting level, so an
    array of records (the same keys in every record) is not a repeat."""
    if '":' not in text and '" :' not in text:
        return []
    best: tuple[int, int, int, str] | None = None  # count, start, end, key
    keys = list(_KEY.finditer(text))
    if len(keys) < REPEATED_KEY:
        return []
    if max(Counter(m.group(1) for m in keys).values()) < REPEATED_KEY:
        return []
    depth_at = _depths(text)
    seen: dict[int, tuple[str, int, int]] = {}  # depth -> (key, count so far, first start)
    for match in keys:
        depth = depth_at[match.start()]
        key = match.group(1)
        last = seen.get(depth)
        if text[match.start()] == "{" or last is None or last[0] != key:
            seen[depth] = (key, 1, match.start())  # a new object, or another key of this one
            continue
        count = last[1] + 1
        seen[depth] = (key, count, last[2])
        if count >= REPEATED_KEY and (best is None or count > best[0]):
            best = (count, last[2], match.end(), key)
    if best is None:
        return []
    count, start, end, key = best
    return [
        Finding(
            "repeated_key",
            float(count),
            float(REPEATED_KEY),
            (start, end),
            text[start : min(end, start + 60)],
            f"one JSON object writes the key {key[:30]!r} {count} times in a row",
        )
    ]


def _depths(text: str) -> list[int]:
    """Nesting depth of brackets before each position, strings skipped (depth of a "{" is that of
    the object it opens)."""
    depths = [0] * (len(text) + 1)
    depth = 0
    in_string = False
    escaped = False
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
            depths[i] = depth
            continue
        if ch == '"':
            in_string = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
        depths[i] = depth
    return depths
