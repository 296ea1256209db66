"""Family `scripts`: writing systems mixed where no writer mixes them.

- script_mix: words that switch script part-way (Latin letters glued to Cyrillic or Telugu), which no
  writing system does (Chinese, Japanese and Korean gluing Latin terms to their words is allowed);
- glued_tokens: vocabulary pieces glued by case ("DungeonCanadaci") where a piece is no word, or Latin
  letters and CJK characters inside one word of an otherwise Latin text ("Sol风湿");
- stray_token: one short CJK run inside an English or code text that has no other CJK in it.

A new detector belongs here when its evidence is which scripts meet, and where.
"""

from __future__ import annotations

import re
from collections import Counter

from k26ctl.smoke import lexicon
from k26ctl.smoke.finding import Finding, excerpt
from k26ctl.smoke.kinds import KindProfile
from k26ctl.smoke.markup import blank_markup
from k26ctl.smoke.wordstats import Word, words_of

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
            excerpt(text, start, end),
            f"{len(mixed)} word(s) switch script part-way ({shown}) across {len(significant)} scripts "
            f"({', '.join(sorted(significant))})",
        )
    ]


# A case join inside a word: "nC" (lower then upper) or "SSi" (an upper run ending where a capitalised
# piece starts).
_CASE_JOIN = re.compile(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_CASE_JOIN_HINT = re.compile(r"[a-z][A-Z]|[A-Z][A-Z][a-z]")
_PIECE_MIN = 4  # letters: shorter pieces ("Mc", "Py", "iOS") are not judged
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]+")
CJK_SCRIPTS = ("Han", "Hiragana", "Katakana", "Hangul")


def detect_glued_tokens(text: str, profile: KindProfile, *, min_glued: int) -> list[Finding]:
    """Vocabulary pieces glued into one word: a case join whose piece is in no word list, or CJK
    characters glued to Latin letters inside a word while the rest of the text is Latin."""
    if not profile.check_gibberish:
        return []
    cjk = not text.isascii() and _CJK.search(text) is not None
    if not cjk and not _CASE_JOIN_HINT.search(text):
        return []  # neither a case join nor a CJK character: nothing can be glued
    words = words_of(blank_markup(text))
    if not words:
        return []
    glued: list[tuple[Word, str]] = []
    # Chinese and Japanese glue Latin terms to their words; in a text that is nearly all Latin, a CJK
    # run glued to lower-case Latin letters is a stray token.
    if cjk:
        latin = sum(len(w.text) for w in words if w.script == "Latin" and not w.mixed)
        if sum(len(m.group()) for m in _CJK.finditer(text)) * 10 < latin:
            glued += [(w, "Latin+CJK") for w in words if _latin_and_cjk(w)]
    glued += [(w, piece) for w in words if w.script == "Latin" and (piece := _odd_piece(w.text))]
    # A glued form the text uses again is a name it means (an identifier, a brand: "GdkPixbuf");
    # vocabulary soup does not come back to the same invention.
    uses = Counter(w.text for w in words)
    glued = sorted((g for g in glued if uses[g[0].text] == 1), key=lambda g: g[0].start)
    if len(glued) < min_glued:
        return []
    # One glued word with a name in it may be a brand ("PostgreSQL"); a text of sentences needs two.
    sentences = len(words) >= 12 and sum(1 for w, _ in glued if not _latin_and_cjk(w)) == len(glued)
    if sentences and len(glued) < 2:
        return []
    start, end = glued[0][0].start, glued[-1][0].end
    shown = ", ".join(repr(w.text[:24]) for w, _ in glued[:3])
    return [
        Finding(
            "glued_tokens",
            float(len(glued)),
            float(min_glued if not sentences else 2),
            (start, end),
            excerpt(text, start, end),
            f"{len(glued)} word(s) glued from vocabulary pieces ({shown})",
        )
    ]


def _latin_and_cjk(word: Word) -> bool:
    if "Latin" not in word.scripts or not any(s in CJK_SCRIPTS for s in word.scripts):
        return False
    latin = "".join(ch for ch in word.text if ch.isascii())
    return not latin.isupper()  # "XXXXコンニチハ" is a width demonstration, not a token


def _odd_piece(word: str) -> str:
    """The first piece of a case-joined word that is in no word list ('' when every piece is a word
    or the word has no case join)."""
    if word.isupper() or word.islower() or not _CASE_JOIN.search(word):
        return ""
    pieces = _CASE_JOIN.split(word)
    if len(pieces) < 2:
        return ""
    for piece in pieces:
        low = piece.lower()
        if len(low) < _PIECE_MIN or piece.isupper():
            continue
        if not lexicon.is_word(low, "en") and not lexicon.in_any_common_list(low, "Latin"):
            return piece
    return ""


_CJK_GLUED = re.compile(
    r"(?<=[A-Za-z0-9_=+\-*/%(.,;:])[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]{1,4}"
    r"|[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]{1,4}(?=[A-Za-z0-9_=+\-*/%)])"
)
_ASCII_LETTER = re.compile(r"[A-Za-z]")
STRAY_MIN_LATIN = 40  # ASCII letters the text must hold for one CJK run to stand out


def detect_stray_cjk(text: str) -> list[Finding]:
    """One short run of CJK characters inside an English or code text that has no other CJK in it
    ("return x +的 y", "and its food 很 and culture"): a single token sampled from the wrong part of
    the vocabulary. Text that writes CJK on purpose writes more of it, sets it apart with quotes or
    brackets, or talks about the language."""
    if text.isascii():
        return []
    runs = list(_CJK.finditer(text))
    if len(runs) != 1 or len(runs[0].group()) > 4 or len(_ASCII_LETTER.findall(text)) < STRAY_MIN_LATIN:
        return []
    start, end = runs[0].span()
    before, after = text[max(0, start - 1) : start], text[end : end + 2]
    if before.isupper():
        return []  # "XXXXコンニチハ": a display-width sample, not a token
    glued = _CJK_GLUED.search(text) is not None
    set_apart = before in _OPENERS or after[:1] in _CLOSERS or after.strip()[:1] in "(:[\"'"
    if not glued and (set_apart or _ABOUT_LANGUAGE.search(text)):
        return []
    # Glued to letters, digits or operators it is a token; between spaces it may be a word quoted
    # without quotes ("the sign said 出口"), so it is reported without failing the text.
    return [
        Finding(
            "stray_token",
            1.0,
            1.0,
            (start, end),
            excerpt(text, max(0, start - 20), end + 20),
            f"a lone CJK token {runs[0].group()!r} inside text otherwise written in Latin letters",
            severity="fail" if glued else "warn",
        )
    ]


_OPENERS = frozenset("\"'`(\u201c\u2018\u300c[")
_CLOSERS = frozenset("\"'`)\u201d\u2019\u300d]")
_ABOUT_LANGUAGE = re.compile(
    r"(?i)chinese|japanese|korean|mandarin|cantonese|kanji|hanzi|hangul|kana|character|word|means"
    r"|written|pronounc|translat|symbol|unicode|emoji"
)


# Letters of any script but the CJK ones, in a run glued to a CJK character on either side.
_CJK_CLASS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af"
_GLUED_TO_CJK = re.compile(
    rf"(?<=[{_CJK_CLASS}])[^\W\d_{_CJK_CLASS}]{{2,}}|[^\W\d_{_CJK_CLASS}]{{2,}}(?=[{_CJK_CLASS}])"
)


def detect_cjk_token_soup(text: str, *, min_fragments: int) -> list[Finding]:
    """CJK text with fragments of other scripts glued into it that are no word ("卫驳wróci",
    "坦essovlGENER粘"): vocabulary pieces of several languages sampled in a row. Chinese and Japanese
    glue real terms ("使用Python编写", "GPU集群"), which are words, acronyms or capitalised names."""
    if text.isascii() or _CJK.search(text) is None:
        return []
    fragments = [
        m
        for m in _GLUED_TO_CJK.finditer(text)
        if not (m.group().isupper() or m.group().istitle()) and not lexicon.is_english_word(m.group())
    ]
    if len({m.group() for m in fragments}) < min_fragments:
        return []
    start, end = fragments[0].start(), fragments[-1].end()
    shown = ", ".join(repr(m.group()[:16]) for m in fragments[:4])
    return [
        Finding(
            "cjk_token_soup",
            float(len(fragments)),
            float(min_fragments),
            (start, end),
            excerpt(text, max(0, start - 10), end),
            f"{len(fragments)} fragments of other scripts glued into CJK text that are no word ({shown})",
        )
    ]


# A CJK run between an operator (or a blank after one) and a number: "= 充0", "^接收3.0.1". (After
# ":" or a quote it may be a value written in Chinese: "title: 第3章".)
_CJK_BEFORE_NUMBER = re.compile(rf"(?<=[=^~<>+\-*/%])[ \t]*[{_CJK_CLASS}]{{1,4}}(?=\d)")


def detect_stray_cjk_in_code(text: str, *, min_runs: int) -> list[Finding]:
    """Short CJK runs glued in front of numbers after code symbols ("rate_limit=一枝2.0", "order: int =
    去打3") in a text that is otherwise Latin letters and code: tokens sampled from the wrong part of
    the vocabulary. Chinese prose writes CJK in front of numbers too ("第3章"), but its CJK characters
    outnumber its Latin letters."""
    if text.isascii():
        return []
    runs = list(_CJK_BEFORE_NUMBER.finditer(text))
    if len(runs) < min_runs:
        return []
    cjk = sum(len(m.group()) for m in _CJK.finditer(text))
    if cjk >= len(_ASCII_LETTER.findall(text)):
        return []  # CJK is a language of this text, not a stray
    start, end = runs[0].start(), runs[-1].end()
    return [
        Finding(
            "cjk_in_code",
            float(len(runs)),
            float(min_runs),
            (start, end),
            excerpt(text, max(0, start - 20), end + 10),
            f"{len(runs)} CJK token(s) glued in front of numbers in code or Latin text "
            f"({', '.join(repr(m.group().strip()) for m in runs[:4])})",
        )
    ]
