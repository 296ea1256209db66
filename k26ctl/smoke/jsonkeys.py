"""JSON objects that repeat one key: a structure loop ("{"a": 1, "a": 1, "a": 1 ...") that neither
parses wrong (duplicate keys are legal JSON) nor needs to reach the loop finder's length."""

from __future__ import annotations

import re
from collections import Counter

from k26ctl.smoke.finding import Finding

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
