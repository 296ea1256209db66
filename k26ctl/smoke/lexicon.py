"""Word validity and function words for many languages, from wordfreq's word-frequency lists.

The lists are read on first use only (the CLI starts without them), through the on-disk cache of
`wordlists` (so wordfreq itself is imported only to fill it). Look-ups go through plain sets and small
caches, because the detectors ask about every word of every text.
Chinese and Japanese need wordfreq's `cjk` extra to be segmented; they are never looked up here.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from functools import lru_cache

from k26ctl.smoke import wordlists

# Languages whose function words are compared to guess which language a run of words is in, by the
# script of their letters. Korean is written with spaces, so its words can be looked up too.
# fmt: off
CANDIDATES: dict[str, tuple[str, ...]] = {
    "Latin": (
        "en", "de", "fr", "es", "it", "pt", "nl", "sv", "da", "nb", "fi", "pl", "cs", "sk", "sl", "sh",
        "hu", "ro", "ca", "tr", "id", "ms", "vi", "lt", "lv", "is", "fil",
    ),
    "Cyrillic": ("ru", "uk", "bg", "mk"),
    "Arabic": ("ar", "fa", "ur"),
    "Hebrew": ("he",),
    "Greek": ("el",),
    "Devanagari": ("hi",),
    "Bengali": ("bn",),
    "Tamil": ("ta",),
    "Hangul": ("ko",),
}
# fmt: on
FUNCTION_WORDS_PER_LANGUAGE = 40  # the most frequent words of a language: articles, pronouns, particles


@lru_cache(maxsize=64)
def _frequencies(lang: str, wordlist: str) -> dict[str, float]:
    import wordfreq

    return wordfreq.get_frequency_dict(lang, wordlist)


@lru_cache(maxsize=64)
def function_words(lang: str) -> frozenset[str]:
    """The language's most frequent words (the head of its small list)."""
    return frozenset(wordlists.ranked_head(lang, "small")[:FUNCTION_WORDS_PER_LANGUAGE])


def guess_language(words: Iterable[str], script: str) -> tuple[str, int]:
    """(language, function-word hits) for lower-cased words of one script; English wins ties. ('', 0)
    when the script has no candidate languages."""
    candidates = CANDIDATES.get(script, ())
    if not candidates:
        return "", 0
    index = _function_word_index(script)
    hits = dict.fromkeys(candidates, 0)
    counts = Counter(words)
    for word in counts.keys() & index.keys():  # only the function words the text uses
        n = counts[word]
        for lang in index[word]:
            hits[lang] += n
    best = max(candidates, key=hits.__getitem__)  # the first (English for Latin) among equals
    return best, hits[best]


@lru_cache(maxsize=16)
def _function_word_index(script: str) -> dict[str, tuple[str, ...]]:
    """Function word -> the candidate languages of `script` that have it."""
    index: dict[str, list[str]] = {}
    for lang in CANDIDATES.get(script, ()):
        for word in function_words(lang):
            index.setdefault(word, []).append(lang)
    return {word: tuple(langs) for word, langs in index.items()}


def zipf(word: str, lang: str) -> float:
    """Zipf frequency (log10 of occurrences per billion words) of a lower-cased word in `lang`'s
    largest list; 0.0 when the list does not have it."""
    freq = _frequencies(lang, "best").get(word)
    return math.log10(freq * 1e9) if freq else 0.0


@lru_cache(maxsize=200_000)
def is_word(word: str, lang: str) -> bool:
    """The lower-cased word is in English's large list (English terms appear in every language's
    technical text) or in `lang`'s list of common words. Other languages' large lists take seconds to
    read, so they are not used: for a language other than English an unknown word may just be rare.
    Apostrophe forms are looked up as written and without the apostrophe's tail."""
    if word in wordlists.members("en", "best") or word in wordlists.members(lang, "small"):
        return True
    plain = word.replace("\u2019", "'")
    if plain != word:
        return is_word(plain, lang)
    head, apostrophe, _tail = plain.partition("'")
    return bool(apostrophe) and len(head) >= 2 and is_word(head, lang)


@lru_cache(maxsize=50_000)
def in_any_common_list(word: str, script: str) -> bool:
    """Some language written in `script` has the word among its common words (its small list)."""
    return any(word in wordlists.members(lang, "small") for lang in CANDIDATES.get(script, ()))


def preload() -> None:
    """Read now the lists that texts in Latin script need (English's large list, and each Latin-script
    language's function words and common words): processes forked after this share them instead of
    each reading them again on first use (about 0.5 s)."""
    wordlists.members("en", "best")
    _function_word_index("Latin")
    for lang in CANDIDATES["Latin"]:
        wordlists.members(lang, "small")


def is_english_word(word: str) -> bool:
    return is_word(word.lower(), "en")
