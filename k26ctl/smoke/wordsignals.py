"""Word-level signs of broken decoding, for any language written with spaces.

- non_words / word_salad: words that no word list of the text's language (nor English) has, and text
  without the function words every real sentence carries (wordfreq's lists, see lexicon.py);
- stutter: a word or a word pair written twice in a row ("one of the of the", "are are we we");
- script_mix: words that switch script part-way (Latin letters glued to Cyrillic or Telugu), which no
  writing system does (Chinese, Japanese and Korean gluing Latin terms to their words is allowed);
- tokenizer_leak: BPE markers and byte tokens in the text (Ġ, Ċ, ▁, <0x0A>) and text decoded with the
  wrong byte encoding (mojibake, judged by ftfy).

Each detector is a pure function of the text (and the kind's profile) returning `Finding`s.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache
from itertools import compress, count
from operator import attrgetter, eq

from k26ctl.smoke import lexicon
from k26ctl.smoke.finding import Finding
from k26ctl.smoke.kinds import KindProfile
from k26ctl.smoke.wordstats import Word, words_of


def _excerpt(text: str, start: int, end: int, limit: int = 60) -> str:
    piece = text[start:end]
    return piece if len(piece) <= limit else piece[: limit - 3] + "..."


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


# ---- non-words and word salad ---------------------------------------------------------------------

# Thresholds (fit on the fit half of the real corpora, see benchmarks/README.md):
NON_WORD_SHARE = 0.3  # of lower-case words of 3+ letters that no list has, in any text of 4+ such words
NON_WORD_SHARE_LOW_FUNCTION = 0.2  # the same when function words are scarce too (< FEW_FUNCTION_WORDS)
FEW_FUNCTION_WORDS = 0.3
FOREIGN_FUNCTION_SHARE = 0.15  # below this share a text not in English has its words judged too
SALAD_FUNCTION_SHARE = 0.08  # word salad: 25+ words of which fewer than this share are function words
SALAD_MIN_WORDS = 25
SALAD_TAIL_WORDS = 20  # a late collapse: the last 20 words of a text of 40 or more
SALAD_FUNCTION_SHARE_TAIL = 0.12  # ... have fewer function words than this, and two non-words
_MIN_ELIGIBLE = 4


def _script_words(text: str) -> tuple[str, list[Word]]:
    words = words_of(blank_markup(text))
    if not words:
        return "", []
    if text.isascii():
        return "Latin", list(words)  # every word of an ASCII text is a Latin word of one script
    script = Counter(map(_script_of, words)).most_common(1)[0][0]
    return script, [w for w in words if w.script == script and not w.mixed]


_script_of = attrgetter("script")


def detect_non_words(text: str, profile: KindProfile) -> list[Finding]:
    """Words that are not words of the text's language, and word salad without function words.

    The language is the one whose most frequent words the text uses most (English on a tie); a word
    is known when English's large list or the language's common-word list has it, and for a text with
    no function word at all, when any language of its script has it among its common words.
    Capitalised words (names) and words under three letters are not judged."""
    if not profile.check_gibberish:
        return []
    script, words = _script_words(text)
    if script in ("Han", "Hiragana", "Katakana", "Thai", "Lao", "Khmer", "Myanmar", "Tibetan"):
        return []  # written without spaces: a letter run is a phrase, not a word
    lowered = [w.text.lower() for w in words]
    lang, hits = lexicon.guess_language(lowered, script)
    if not lang:
        return []
    findings: list[Finding] = []
    function_share = hits / len(words)
    eligible = [w for w, low in zip(words, lowered, strict=True) if w.text == low and len(low) >= 3]
    # Only English is looked up in a large list; a text in another language is judged on its words
    # only when it lacks that language's function words too (real sentences have them).
    judged = lang == "en" or function_share < FOREIGN_FUNCTION_SHARE
    unknown = [w for w in eligible if not _known(w.text, lang, script, hits)] if judged else []
    if len(eligible) >= _MIN_ELIGIBLE and len(unknown) >= 2:
        share = len(unknown) / len(eligible)
        limit = NON_WORD_SHARE_LOW_FUNCTION if function_share < FEW_FUNCTION_WORDS else NON_WORD_SHARE
        if share >= limit:
            start, end = unknown[0].start, unknown[-1].end
            shown = ", ".join(dict.fromkeys(w.text for w in unknown[:4]))
            findings.append(
                Finding(
                    "non_words",
                    round(share, 3),
                    limit,
                    (start, end),
                    _excerpt(text, start, end),
                    f"{len(unknown)} of {len(eligible)} words are in no {lang} or English word list "
                    f"({shown})",
                )
            )
    if len(words) >= SALAD_MIN_WORDS and function_share < SALAD_FUNCTION_SHARE and _runs_on(text, words):
        findings.append(
            Finding(
                "word_salad",
                round(function_share, 3),
                SALAD_FUNCTION_SHARE,
                (words[0].start, words[-1].end),
                _excerpt(text, words[0].start, words[-1].end),
                f"{hits} of {len(words)} words are {lang} function words (real sentences have a third)",
            )
        )
    findings += _salad_tail(text, words, lang, unknown)
    return findings


def _salad_tail(text: str, words: list[Word], lang: str, unknown: list[Word]) -> list[Finding]:
    """A text that starts as sentences and ends as a run-on string of words: its last SALAD_TAIL_WORDS
    words hold almost no function words and some non-words (an ending list of names, packages or
    commands has few words per line)."""
    if len(words) < 2 * SALAD_TAIL_WORDS:
        return []
    tail = words[-SALAD_TAIL_WORDS:]
    function = lexicon.function_words(lang)
    share = sum(w.text.lower() in function for w in tail) / len(tail)
    odd = [w for w in unknown if w.start >= tail[0].start]
    if share >= SALAD_FUNCTION_SHARE_TAIL or len(odd) < 2 or not _runs_on(text[tail[0].start :], tail):
        return []
    start = tail[0].start
    return [
        Finding(
            "word_salad",
            round(share, 3),
            SALAD_FUNCTION_SHARE_TAIL,
            (start, len(text)),
            _excerpt(text, start, len(text)),
            f"the last {len(tail)} words have {share:.0%} function words and {len(odd)} non-words "
            f"({', '.join(w.text for w in odd[:3])}): the text collapses into word salad",
        )
    ]


def _known(word: str, lang: str, script: str, hits: int) -> bool:
    if lexicon.is_word(word, lang):
        return True
    return hits == 0 and lexicon.in_any_common_list(word, script)


def _runs_on(text: str, words: Sequence[Word]) -> bool:
    """Word salad runs on: lines of eight words or more on average (a list of names, tags or table
    cells has few words per line and rightly no function words)."""
    lines = sum(1 for line in text.splitlines() if line.strip())
    return len(words) / max(lines, 1) >= 8


# ---- stutter -------------------------------------------------------------------------------------

# Words doubled on purpose ("that that", "had had", "bye bye", "very very", "no no") or by grammar.
# fmt: off
_REDUPLICATED = frozenset(
    (
        "that", "had", "is", "do", "does", "did", "no", "so", "very", "bye", "ha", "he", "hee", "ho", "la",
        "na", "da", "yes", "well", "now", "there", "come", "go", "really", "many", "much", "more", "knock",
        "tut", "hip", "chop", "pretty", "far", "long", "away", "again", "and", "over", "round",
        # grammatical doubles: French reflexives ("nous nous sommes"), German and Dutch pronouns that
        # open a relative or subordinate clause ("die die Zeitung liest", "dat dat klopt")
        "nous", "vous", "die", "der", "das", "den", "dem", "dat",
    )
)
# fmt: on
STUTTER_EVENTS = 3  # doubled words (or any doubled pair of function words) that fail a text


def detect_stutter(text: str, profile: KindProfile) -> list[Finding]:
    """A word or a pair of words written twice in a row with only blanks between: a token emitted
    twice (streaming chunks forwarded twice, a verify step that accepts a token again). One doubled
    pair with a function word in it ("one of the of the most") or one doubled common function word
    ("the the") is enough; other doubled words count when there are several. Capitalised doubles that
    are not function words are names called twice ("Antonio Antonio")."""
    if profile.name in ("code", "table", "json", "art", "math"):
        return []
    words = [w for w in words_of(blank_markup(text)) if w.script not in ("Han", "Hiragana", "Katakana")]
    if len(words) < 3:
        return []
    lowered = [w.text.lower() for w in words]
    # A double starts only where a word comes back one word later (a doubled word) or two (a doubled
    # pair); everywhere else the scan below would just step on.
    candidates = sorted(
        {*compress(count(), map(eq, lowered, lowered[1:])), *compress(count(), map(eq, lowered, lowered[2:]))}
    )
    # Only a word equal to the next one, or a pair equal to the next pair (its first word already comes
    # back two words later), can make an event: the language, for its function words, is guessed only
    # for texts that have one.
    last = len(lowered) - 1
    candidates = [
        i
        for i in candidates
        if lowered[i] == lowered[i + 1] or (i + 3 <= last and lowered[i + 1] == lowered[i + 3])
    ]
    if not candidates:
        return []
    script = "Latin" if text.isascii() else Counter(w.script for w in words).most_common(1)[0][0]
    lang, _hits = lexicon.guess_language(lowered, script)
    function = lexicon.function_words(lang) if lang else frozenset()
    events: list[tuple[int, int, str]] = []
    strong = 0
    resume = 0  # the first word not yet part of an event
    for i in candidates:
        if i < resume:
            continue
        pair = _doubled_pair(text, words, lowered, i)
        if pair and (lowered[i] in function or lowered[i + 1] in function):
            events.append((words[i].start, words[i + 3].end, f"{lowered[i]} {lowered[i + 1]}"))
            strong += 1
            resume = i + 4
            continue
        if lowered[i] == lowered[i + 1] and _only_blanks(text, words[i].end, words[i + 1].start):
            word = lowered[i]
            name = words[i].text[:1].isupper() and words[i + 1].text[:1].isupper() and word not in function
            if word not in _REDUPLICATED and not word.isdigit() and not name:
                events.append((words[i].start, words[i + 1].end, word))
                strong += word in function and len(word) >= 2
            resume = i + 2
    if not events or (strong == 0 and len(events) < STUTTER_EVENTS):
        return []
    start, end = events[0][0], events[-1][1]
    shown = ", ".join(dict.fromkeys(repr(e[2]) for e in events[:4]))
    return [
        Finding(
            "stutter",
            float(len(events)),
            float(STUTTER_EVENTS if strong == 0 else 1),
            (start, end),
            _excerpt(text, start, end),
            f"{len(events)} word(s) or word pair(s) written twice in a row ({shown})",
        )
    ]


def _only_blanks(text: str, start: int, end: int) -> bool:
    return start < end and text[start:end].isspace()


def _doubled_pair(text: str, words: Sequence[Word], lowered: list[str], i: int) -> bool:
    if i + 3 >= len(words) or lowered[i] == lowered[i + 1]:
        return False
    if lowered[i] != lowered[i + 2] or lowered[i + 1] != lowered[i + 3]:
        return False
    return all(_only_blanks(text, words[k].end, words[k + 1].start) for k in range(i, i + 3))


# ---- script mixing -------------------------------------------------------------------------------

MIXED_WORDS = 2  # words switching script that fail a text (one, when the text uses three scripts)


def detect_script_mix(text: str, profile: KindProfile) -> list[Finding]:
    """Words whose letters switch between scripts that are never written together inside a word
    (Latin and Cyrillic, Latin and Telugu, Cyrillic and Han): vocabulary pieces of several languages
    glued together. A single Greek letter in a Latin word is a unit or a symbol ("10μm"), not a switch."""
    if text.isascii():
        return []
    words = words_of(blank_markup(text))
    mixed = [w for w in words if w.mixed and min(w.run_lengths) >= 2]
    if not mixed:
        return []
    scripts = Counter(s for w in words for s in w.scripts)
    significant = {s for s, n in scripts.items() if n >= 2}
    if len(mixed) < MIXED_WORDS and len(significant) < 3:
        return []
    start, end = mixed[0].start, mixed[-1].end
    shown = ", ".join(repr(w.text[:24]) for w in mixed[:3])
    return [
        Finding(
            "script_mix",
            float(len(mixed)),
            float(MIXED_WORDS),
            (start, end),
            _excerpt(text, start, end),
            f"{len(mixed)} word(s) switch script part-way ({shown}) across {len(significant)} scripts "
            f"({', '.join(sorted(significant))})",
        )
    ]


# ---- tokenizer leaks -----------------------------------------------------------------------------

# GPT-2 style byte-level BPE shows a space as Ġ (U+0120) and a newline as Ċ (U+010A); SentencePiece
# shows a space as ▁ (U+2581). Glued to letters or digits they are a detokenizer that was skipped.
_BPE_MARKER = re.compile(r"[\u0120\u010a\u2581](?=[^\W_])|(?<=[^\W_])[\u0120\u010a\u2581]")
_BYTE_TOKEN = re.compile(r"<0x[0-9A-Fa-f]{2}>")
BPE_MARKERS = 2
# Only text with Latin-1 or Latin Extended letters can be UTF-8 decoded as Latin-1/cp1252.
_MOJIBAKE_CANDIDATE = re.compile("[\u0080-\u024f]")


def detect_tokenizer_leak(text: str) -> list[Finding]:
    """BPE space/newline markers glued to words, byte tokens such as <0x0A>, and mojibake (UTF-8 bytes
    shown as Latin-1 or as the byte-level BPE alphabet, ftfy's `badness` > 0 with `is_bad`)."""
    findings: list[Finding] = []
    # The look-around pattern is slow over a long text: run it only where a marker character occurs.
    has_marker = "\u0120" in text or "\u010a" in text or "\u2581" in text
    markers = list(_BPE_MARKER.finditer(text)) if has_marker else []
    byte_tokens = list(_BYTE_TOKEN.finditer(text)) if "<0x" in text else []
    if len(markers) >= BPE_MARKERS or byte_tokens:
        hits = sorted(markers + byte_tokens, key=lambda m: m.start())
        start, end = hits[0].start(), hits[-1].end()
        kinds = sorted({m.group() for m in hits})[:4]
        findings.append(
            Finding(
                "tokenizer_leak",
                float(len(hits)),
                float(BPE_MARKERS if not byte_tokens else 1),
                (start, end),
                _excerpt(text, start, end),
                f"{len(hits)} tokenizer marker(s) or byte token(s) in the text ({', '.join(kinds)})",
            )
        )
    if _MOJIBAKE_CANDIDATE.search(text):
        from ftfy import badness

        score = badness.badness(text)
        if score >= 1 and badness.is_bad(text):
            findings.append(
                Finding(
                    "mojibake",
                    float(score),
                    1.0,
                    (0, len(text)),
                    _excerpt(text, 0, len(text)),
                    f"{score} sequence(s) of UTF-8 bytes shown as single characters (mojibake)",
                )
            )
    return findings
