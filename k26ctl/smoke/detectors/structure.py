"""Family `structure`: structured output (JSON, templates) whose structure breaks.

- broken_json: a JSON answer whose structure breaks before its end;
- empty_slots: the same frame written again and again with nothing in its slots;
- repeated_key: one JSON key written again and again in one object.

A new detector belongs here when it parses the text's structure (brackets, keys, slots).
"""

from __future__ import annotations

import itertools
import json
import re
from collections import Counter

from k26ctl.smoke.finding import Finding, excerpt
from k26ctl.smoke.kinds import KindProfile
from k26ctl.smoke.markup import blank_markup

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
REPEATED_KEY = 3  # the same key this many times in one object (JSON objects name each key once)


def detect_repeated_key(text: str) -> list[Finding]:
    """One object writes the same key three or more times, other keys between or not. Keys are
    counted per object, so an array of records (the same keys in every record) is not a repeat."""
    if '":' not in text and '" :' not in text:
        return []
    keys = list(_KEY.finditer(text))
    if len(keys) < REPEATED_KEY:
        return []
    if max(Counter(m.group(1) for m in keys).values()) < REPEATED_KEY:
        return []
    owner = _objects(text)
    counts: Counter[tuple[int, str]] = Counter()
    first: dict[tuple[int, str], int] = {}
    best: tuple[int, int, int, str] | None = None  # count, start, end, key
    for match in keys:
        # a key right after "{" belongs to the object that brace opens
        opened = match.start() if text[match.start()] == "{" else owner[match.start()]
        slot = (opened, match.group(1))
        counts[slot] += 1
        first.setdefault(slot, match.start())
        if counts[slot] >= REPEATED_KEY and (best is None or counts[slot] > best[0]):
            best = (counts[slot], first[slot], match.end(), match.group(1))
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
            f"one JSON object writes the key {key[:30]!r} {count} times",
        )
    ]


def _objects(text: str) -> list[int]:
    """Per position, where the innermost object open there started (its "{"), -1 outside any;
    strings are skipped, and arrays are transparent (a key belongs to the object around them)."""
    owner = [-1] * (len(text) + 1)
    stack: list[int] = []  # positions of open "{" (and -2 for an open "[")
    in_string = False
    escaped = False
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch in '"\n':  # (a JSON string holds no raw newline: a stray quote ends with its line)
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch == "{":
            stack.append(i)
        elif ch == "[":
            stack.append(-2)
        elif ch in "}]" and stack:
            stack.pop()
        owner[i] = next((o for o in reversed(stack) if o != -2), -1) if stack else -1
    return owner


_PAIRS = {")": "(", "]": "[", "}": "{"}
_BRACKET = re.compile(r"[()\[\]{}]")
# A quoted string on one line (a quote not glued to a letter before it, so "don't" opens nothing).
_LITERAL = re.compile(r"(?<![^\W\d_])(\"[^\"\n]*\"|'[^'\n]*')")


def _blank_literals(text: str) -> str:
    """Quoted strings become blanks of the same length: brackets inside them ("'\\x1b[H'", "'%s}'")
    are data, not structure."""
    if '"' not in text and "'" not in text:
        return text
    return _LITERAL.sub(lambda m: " " * len(m.group()), text)


def detect_crossed_brackets(text: str, profile: KindProfile, *, min_crossed: int) -> list[Finding]:
    """Brackets closed by the wrong kind while open ("for(let 7; } else {", "a class](new}-admin",
    "{ { } ] { ] }"): structure that never closes, the mark of code or JSON decoded into soup. A
    closer with nothing open is not counted (an excerpt may start inside a block), nor ")" after a
    letter or digit (list labels "a)", "1)", intervals "[0, 1)"), nor math, where "(0, 1]" is an
    interval, nor ASCII art, whose brackets draw."""
    if profile.name in ("math", "art") or not any(ch in text for ch in "([{"):
        return []
    text = _blank_literals(blank_markup(text))  # same length: positions stay valid
    stack: list[str] = []
    crossed: list[int] = []
    for match in _BRACKET.finditer(text):  # (the brackets only: a loop over every character cost more)
        i, ch = match.start(), match.group()
        if ch in "([{":
            stack.append(ch)
        elif ch in _PAIRS and stack:
            if stack[-1] == _PAIRS[ch]:
                stack.pop()
                continue
            if ch == ")" and i and text[i - 1].isalnum():
                continue
            crossed.append(i)
            if _PAIRS[ch] in stack:  # close what it closes; the brackets opened inside it stay unclosed
                del stack[len(stack) - 1 - stack[::-1].index(_PAIRS[ch]) :]
    if len(crossed) < min_crossed:
        return []
    start, end = crossed[0], crossed[-1] + 1
    return [
        Finding(
            "crossed_brackets",
            float(len(crossed)),
            float(min_crossed),
            (start, end),
            excerpt(text, max(0, start - 20), end),
            f"{len(crossed)} bracket(s) closed by the wrong kind while open",
        )
    ]


_BARE_NUMBER_LINE = re.compile(r"(?m)^[ \t]*(\d{1,6})[ \t]*$")


def detect_count_gap(text: str, *, min_lines: int) -> list[Finding]:
    """A count written one number a line that steps by one yet skips or doubles a number ("1 3 5 6 8
    10 11 12"): tokens dropped or repeated while counting. A sequence with its own step (odd numbers,
    every fifth year) keeps that step, and a numbered list that starts over goes back, not forward."""
    if "\n" not in text:
        return []
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < min_lines:
        return []
    numbers = [_BARE_NUMBER_LINE.fullmatch(line) for line in lines]
    best: tuple[int, int] | None = None  # first and last index of the longest run of number lines
    run_start = 0
    for i, match in enumerate([*numbers, None]):
        if match is None:
            if best is None or i - run_start > best[1] - best[0] + 1:
                best = (run_start, i - 1)
            run_start = i + 1
    if best is None or best[1] - best[0] + 1 < min_lines:
        return []
    values = [int(m.group(1)) for m in numbers[best[0] : best[1] + 1] if m is not None]
    steps = [b - a for a, b in itertools.pairwise(values)]
    odd = [s for s in steps if s in (0, 2)]
    if any(s not in (0, 1, 2) for s in steps) or not odd or steps.count(1) < 0.6 * len(steps):
        return []
    return [
        Finding(
            "count_gap",
            float(len(odd)),
            1.0,
            (0, len(text)),
            excerpt(text, 0, len(text)),
            f"a count of {len(values)} numbers steps by one but skips or repeats {len(odd)} time(s)",
        )
    ]
