"""An English word list (SCOWL via Debian's wamerican, see data/README.md), loaded once on demand."""

from __future__ import annotations

import gzip
from functools import lru_cache
from pathlib import Path

_WORDS = Path(__file__).parent / "data" / "english-words.txt.gz"


@lru_cache(maxsize=1)
def english_words() -> frozenset[str]:
    with gzip.open(_WORDS, "rt", encoding="utf-8") as handle:
        return frozenset(handle.read().split("\n"))


def is_english_word(word: str) -> bool:
    """Lower-case lookup; a few regular inflections the list may lack are tried too."""
    words = english_words()
    w = word.lower().replace("\u2019", "'")
    if w in words:
        return True
    for clitic in ("n't", "'s", "'re", "'ve", "'ll", "'d", "'m", "'"):
        if w.endswith(clitic) and len(w) > len(clitic) + 1:
            stem = w[: -len(clitic)]
            if clitic == "n't" and stem in ("ca", "wo", "sha"):
                return True  # can't, won't, shan't
            if clitic == "'" and stem.endswith("in"):
                stem += "g"  # dropped g: "lookin'"
            return is_english_word(stem)
    for suffix, replacement in (
        ("s", ""),
        ("es", ""),
        ("ed", ""),
        ("ed", "e"),
        ("ing", ""),
        ("ing", "e"),
        ("ly", ""),
    ):
        if w.endswith(suffix) and len(w) > len(suffix) + 2 and w[: -len(suffix)] + replacement in words:
            return True
    # agent nouns and common derivations the list may lack ("installer", "rebootable"), from stems long
    # enough not to turn garbled short words into derivations ("winer" is not "win" + "er")
    for suffix in ("er", "ers", "able", "ness", "ment", "less"):
        if w.endswith(suffix) and len(w) - len(suffix) >= 5 and w[: -len(suffix)] in words:
            return True
    for prefix in ("un", "re", "pre", "non", "sub", "multi"):
        if w.startswith(prefix) and len(w) > len(prefix) + 3 and w[len(prefix) :] in words:
            return True
    return False
