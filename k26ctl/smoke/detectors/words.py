"""Family `words`: words that no writer produces.

- gibberish: stray one- and two-letter fragments and vowel-less words in English prose;
- non_words / word_salad: words that no word list of the text's language (nor English) has, and text
  without the function words every real sentence carries (wordfreq's lists, see lexicon.py);
- stutter: a word or a word pair written twice in a row ("one of the of the", "are are we we");
- short_gibberish: a short answer whose every lower-case word is in no word list.

A new detector belongs here when it judges words against the word lists or their shape.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from itertools import compress, count
from operator import attrgetter, eq

from k26ctl.smoke import lexicon
from k26ctl.smoke.detectors.scripts import CJK_SCRIPTS
from k26ctl.smoke.finding import Finding, excerpt
from k26ctl.smoke.kinds import KindProfile
from k26ctl.smoke.markup import blank_markup
from k26ctl.smoke.wordstats import Word, words_of


# Short English words; anything else of one or two letters in running prose is a fragment.
def _word_set(*lines: str) -> frozenset[str]:
    return frozenset(re.findall(r"[a-z]+", " ".join(lines)))


_SHORT_WORDS = _word_set(
    "a i o am an as at be by do go he hi if in is it me my no of oh ok on or so to up us we ye ah eh",
    "ha mr ms dr st vs id tv uk ai ad pm km cm mm kg ml ex",
)
# Abbreviations ("e.g.", "U.S.") and one-letter labels ("Q:", "A)", "B.") are not word fragments.
# Written as: a letter, then per alternative what the original three checked around it
# (r"\b(?:[A-Za-z]\.){2,}|\b[A-Z]\.(?=\s+[A-Z])|(?<![\w.])[A-Z][:.)](?=\s)"): a pattern that starts with a
# character class lets the engine skip to the letters instead of trying the look-behinds everywhere,
# and every alternative goes on with one of ".:)", so a letter followed by anything else fails at once.
_ABBREVIATION = re.compile(
    r"[A-Za-z](?=[.:)])(?:(?<!\w[A-Za-z])\.(?:[A-Za-z]\.)+"
    r"|(?<=[A-Z])(?<!\w[A-Z])\.(?=\s+[A-Z])"
    r"|(?<=[A-Z])(?<![\w.][A-Z])[:.)](?=\s))"
)
# Letters glued to a number ("500g", "3x", "10ml") are units, not words.
_VOWEL = re.compile("[aeiouyAEIOUY]")
_TRIPLED = re.compile(r"([a-z])\1\1")
# Latin words not glued to a letter or digit before them, once written with a leading look-behind
# (r"(?<![0-9A-Za-z])[A-Za-z]+(?:['\u2019][A-Za-z]+)?"): led by their first letter, so that the engine
# skips to letters; the look-behind after that letter checks the character before it.
_LATIN_WORD = re.compile(r"[A-Za-z](?<![0-9A-Za-z][A-Za-z])[A-Za-z]*(?:['\u2019][A-Za-z]+)?")


def detect_gibberish(text: str, profile: KindProfile) -> list[Finding]:
    """Character-level decay in English prose: stray one- and two-letter fragments, vowel-less words and
    letters tripled inside words. It runs only when the text is English (its function words are the
    most frequent), so an answer in French or German is not mistaken for gibberish; words that are no
    words in any language are `wordsignals.detect_non_words`'s."""
    if not profile.check_gibberish:
        return []
    cleaned = _ABBREVIATION.sub(lambda m: " " * len(m.group()), blank_markup(text))
    words = _LATIN_WORD.findall(cleaned)
    if len(words) < 20:
        return []
    lowered = [word.lower() for word in words]
    if lexicon.guess_language(lowered, "Latin")[0] != "en":
        return []  # a non-English text's short words are not fragments of English words
    # A word's lower-cased letters are also in the lower-cased text (ASCII letters change one by one),
    # so a text without any tripled letter spares every word that search.
    any_tripled = _TRIPLED.search(cleaned.lower()) is not None
    odd = 0
    first_odd = -1
    # the same matches again, for the positions of the few words that need them (found once, and only
    # when one does: most texts have no odd word and no short word outside the list)
    matches: list[re.Match[str]] = []
    for i, word in enumerate(words):
        if len(word) <= 2:  # a stray fragment?
            if (lowered[i] in _SHORT_WORDS or word.isupper()) and (len(word) != 1 or word in "aAI"):
                continue  # a short English word, or an acronym
            matches = matches or list(_LATIN_WORD.finditer(cleaned))
            if not _stands_alone(cleaned, matches[i].start(), matches[i].end()):
                continue
        elif (_VOWEL.search(word) or word.isupper()) and not (any_tripled and _TRIPLED.search(lowered[i])):
            continue  # word-shaped: a vowel (or an acronym), and no letter tripled
        odd += 1
        if first_odd < 0:
            matches = matches or list(_LATIN_WORD.finditer(cleaned))
            first_odd = matches[i].start()
    findings: list[Finding] = []
    start = max(first_odd, 0)
    share = odd / len(words)
    if odd >= 4 and share >= _FRAGMENT_SHARE:
        findings.append(
            Finding(
                "gibberish",
                round(share, 3),
                _FRAGMENT_SHARE,
                (start, len(text)),
                excerpt(text, start, len(text)),
                f"{odd} of {len(words)} words are fragments or not word-shaped",
            )
        )
    return findings


_FRAGMENT_SHARE = 0.12
_WORD_END = " \t\n,.;:!?-"


def _stands_alone(text: str, start: int, end: int) -> bool:
    """A short word between blanks or sentence punctuation; one glued to code symbols ("-l", "x86",
    "sl = ...('abcde')" leftovers, "\\t") is part of a command or an identifier, not a fragment."""
    before = text[start - 1] if start else " "
    after = text[end] if end < len(text) else " "
    return before.isspace() and after in _WORD_END


_UNKNOWN_SHARE = 0.3


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
                    excerpt(text, start, end),
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
                excerpt(text, words[0].start, words[-1].end),
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
            excerpt(text, start, len(text)),
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


def detect_stutter(text: str, profile: KindProfile, *, min_events: int) -> list[Finding]:
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
            # "LPOVERLAPPED lpOverlapped": a type and its variable; "root root 4096": a listing's columns
            declared = words[i].text != words[i + 1].text and word not in function
            columns = _NUMBER_AFTER.match(text, words[i + 1].end) is not None
            if word not in _REDUPLICATED and not word.isdigit() and not name and not declared and not columns:
                events.append((words[i].start, words[i + 1].end, word))
                # (English's article doubled in lower case, "observing a a peaceful", is no label)
                strong += word in function and (len(word) >= 2 or (lang == "en" and words[i].text == "a"))
            resume = i + 2
    if not events or (strong == 0 and len(events) < min_events):
        return []
    start, end = events[0][0], events[-1][1]
    shown = ", ".join(dict.fromkeys(repr(e[2]) for e in events[:4]))
    return [
        Finding(
            "stutter",
            float(len(events)),
            float(min_events if strong == 0 else 1),
            (start, end),
            excerpt(text, start, end),
            f"{len(events)} word(s) or word pair(s) written twice in a row ({shown})",
        )
    ]


_NUMBER_AFTER = re.compile(r"[ \t]+\d")


def _only_blanks(text: str, start: int, end: int) -> bool:
    return start < end and text[start:end].isspace()


def _doubled_pair(text: str, words: Sequence[Word], lowered: list[str], i: int) -> bool:
    if i + 3 >= len(words) or lowered[i] == lowered[i + 1]:
        return False
    if lowered[i] != lowered[i + 2] or lowered[i + 1] != lowered[i + 3]:
        return False
    return all(_only_blanks(text, words[k].end, words[k + 1].start) for k in range(i, i + 3))


_SHORT_MAX_CHARS = 160
_GIBBERISH_MIN_LETTERS = 4


def detect_short_gibberish(text: str, profile: KindProfile, *, max_words: int) -> list[Finding]:
    """A short answer (six words of three letters or more at most) none of whose words of three
    letters or more is in a word list of its script's languages, one of them a lower-case word of
    four letters ("ersetvod", "ervi acesaces acesaces"). Shorter pieces ("D", "PP") are not judged."""
    if not profile.check_gibberish or len(text) > _SHORT_MAX_CHARS:
        return []
    words = [w for w in words_of(blank_markup(text)) if len(w.text) >= 3]
    if not words or len(words) > max_words:
        return []
    script = Counter(w.script for w in words).most_common(1)[0][0]
    if script not in lexicon.CANDIDATES or script in CJK_SCRIPTS:
        return []
    lang = lexicon.guess_language([w.text.lower() for w in words], script)[0] or "en"
    judged = [w for w in words if w.text.islower() and len(w.text) >= _GIBBERISH_MIN_LETTERS]
    if not judged:
        return []
    for w in words:
        low = w.text.lower()
        if lexicon.is_word(low, lang) or lexicon.in_any_common_list(low, script):
            return []
    start, end = words[0].start, words[-1].end
    shown = ", ".join(dict.fromkeys(repr(w.text[:20]) for w in judged[:3]))
    return [
        Finding(
            "short_gibberish",
            float(len(judged)),
            1.0,
            (start, end),
            excerpt(text, start, end),
            f"a short answer of no known words ({shown})",
        )
    ]
