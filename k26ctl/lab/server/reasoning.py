"""Split a generation into reasoning (the think block) and answer, also incrementally for streams."""

from __future__ import annotations

THINK_START = "<think>"
THINK_END = "</think>"


def _held_back(text: str, tag: str) -> int:
    """Length of the longest suffix of `text` that is a proper prefix of `tag` (maybe a tag in the making)."""
    for n in range(min(len(tag) - 1, len(text)), 0, -1):
        if tag.startswith(text[-n:]):
            return n
    return 0


def split_reasoning(text: str, final: bool = True) -> tuple[str, str]:
    """(reasoning, content). Text before any think block is content; an unclosed block is reasoning.

    With `final=False` a trailing partial tag is kept back from both parts, so a stream never has
    to take back what it sent.
    """
    stripped = text.lstrip()
    if not stripped.startswith(THINK_START):
        if not final and THINK_START.startswith(stripped):
            return "", ""
        return "", text
    body = stripped[len(THINK_START) :]
    end = body.find(THINK_END)
    if end == -1:
        keep = 0 if final else _held_back(body, THINK_END)
        return body[: len(body) - keep], ""
    return body[:end], body[end + len(THINK_END) :]
