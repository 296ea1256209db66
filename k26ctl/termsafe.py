"""One sanitiser for every server- or file-supplied string that reaches a terminal.

A model id, an HTTP error body or a key in a profile can carry ESC sequences (clear screen, window
title, OSC 52 clipboard writes, OSC 8 links), C1 controls, bidi overrides that reorder what the
operator reads, Unicode line separators and lone surrogates (which cannot even be encoded to UTF-8).
`clean` replaces each with a visible escape (`\\x1b`, `\\u202e`), so the text stays readable and
inert. `for_rich` also escapes Rich markup, so `[/]` in a model id is shown, not interpreted.
"""

from __future__ import annotations

import re

# C0 controls, DEL, C1 controls; bidi embeddings/overrides/isolates and marks; line/paragraph
# separators; lone surrogates.
_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ud800-\udfff]"
)
_UNSAFE_KEEP_LINES = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ud800-\udfff]"
)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def clean(text: object, *, keep_newlines: bool = False, limit: int | None = None) -> str:
    """`text` as a string safe to print: every control, bidi and separator character escaped.

    With `keep_newlines`, "\\n" and "\\t" are kept (multi-line answers); `limit` cuts the input
    first (with an ellipsis), so a megabyte body costs nothing to show."""
    value = text if isinstance(text, str) else str(text)
    cut = limit is not None and len(value) > limit
    if cut:
        value = value[:limit]
    pattern = _UNSAFE_KEEP_LINES if keep_newlines else _UNSAFE
    value = pattern.sub(_escape, value)
    return value + "..." if cut else value


def for_rich(text: object, *, limit: int | None = None) -> str:
    """`clean`, then Rich markup escaped: for strings inside a markup-enabled Rich print."""
    from rich.markup import escape

    return escape(clean(text, limit=limit))


def _json_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def json_text(document: object, *, indent: int | None = None) -> str:
    """JSON for a terminal or a pipe: readable non-ASCII text, but every control, bidi or separator
    character and every lone surrogate written as a \\uXXXX escape (still the same JSON value)."""
    import json

    text = json.dumps(document, indent=indent, default=str, ensure_ascii=False)
    return _UNSAFE_KEEP_LINES.sub(_json_escape, text)


def is_clean(text: str) -> bool:
    return _UNSAFE.search(text) is None
