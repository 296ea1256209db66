"""Markup that is not prose (URLs, e-mail addresses, inline code, identifiers), blanked before words
are judged, and the preloading of the word lists the word-level detectors read."""

from __future__ import annotations

import re
from functools import lru_cache

from k26ctl.smoke import lexicon

# URLs, e-mail addresses, inline code and dotted/underscored identifiers are not prose words; they are
# blanked (same length, so spans stay valid).
_EMAIL = r"|\S+@\S+\.\w+"
_MARKUP_PATTERN = (
    r"```.*?(?:```|\Z)|https?://\S+|www\.\S+" + _EMAIL + r"|``.*?``|`[^`\n]*`|\b\w+(?:[._/]\w+)+\b"
    r"|\[[A-Za-z_]+\d*\]|<\|?[A-Za-z_]+\d*\|?>"
)
_MARKUP = re.compile(_MARKUP_PATTERN, re.DOTALL)
# The address alternative tries every non-blank position of every word and backtracks to its start:
# without an "@" in the text it cannot match, and the same pattern without it is twice as fast.
_MARKUP_WITHOUT_EMAIL = re.compile(_MARKUP_PATTERN.replace(_EMAIL, "", 1), re.DOTALL)


# Every markup alternative holds one of these, or a word character, one of "._/" and another word
# character (led by "._/" here, so the engine jumps to those characters instead of trying each position).
_MARKUP_SIGNS = ("`", "[", "<", "://", "www.", "@")
_DOTTED = re.compile(r"[._/](?<=\w[._/])\w")


@lru_cache(maxsize=8)
def blank_markup(text: str) -> str:
    if not any(sign in text for sign in _MARKUP_SIGNS) and not _DOTTED.search(text):
        return text  # nothing the markup pattern could match (the pattern tries every position)
    pattern = _MARKUP if "@" in text else _MARKUP_WITHOUT_EMAIL
    return pattern.sub(lambda m: " " * len(m.group()), text)


def preload() -> None:
    """Load now what the word-level detectors would load on first use (see `lexicon.preload`)."""
    lexicon.preload()
    from ftfy import badness  # noqa: F401  (its import builds large patterns: about 0.14 s)
