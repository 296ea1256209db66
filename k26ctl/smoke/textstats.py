"""Small text measurements the detectors are built from.

Everything here works on characters, not on whitespace tokens, so that CJK text (no spaces) and
symbol runs ("!!!!") are measured like any other text. Per-character questions are asked of whole
texts through regular expressions (Unicode properties of the `regex` module), so the work runs in C.
"""

from __future__ import annotations

import re
import unicodedata
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache

import regex

# Zero-width and format characters that render as nothing. U+200D (ZWJ) and U+200C (ZWNJ) have
# legitimate uses (emoji sequences, Persian); callers decide about context.
INVISIBLE = frozenset(
    "\u200b\u200c\u200d\u200e\u200f\u2060\u2061\u2062\u2063\u2064\ufeff\u00ad\u180e\u034f"
    "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)


_WIDE = regex.compile(r"[\p{East_Asian_Width=Wide}\p{East_Asian_Width=Fullwidth}]")
_NOT_LETTER = regex.compile(r"\P{L}+")
_CJK_LETTER = regex.compile(r"[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}]")
# Unicode's White_Space characters (what the `regex` module's \\s matches; the `re` module's \\s adds
# U+001C..U+001F): listed so that the faster `re` engine can remove them.
WHITE_SPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)
_HIDDEN_OR_BLANK = re.compile("[" + re.escape(WHITE_SPACE + "".join(sorted(INVISIBLE))) + "]+")


# Links are not prose: left out where words or repeats are counted.
LINK = re.compile(r"https?://\S+|www\.\S+")


def may_hold_link(text: str) -> bool:
    """False when LINK cannot match the text: two substring tests in C before a regex pass."""
    return "://" in text or "www." in text


def is_wide(ch: str) -> bool:
    return _WIDE.match(ch) is not None


def wide_count(text: str) -> int:
    """Characters of East Asian width Wide or Fullwidth (CJK, full-width forms, most emoji)."""
    if text.isascii():
        return 0  # str.isascii reads a flag of the string: no scan
    return len(_WIDE.findall(text))


ASCII_ALNUM = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
ASCII_DIGITS = b"0123456789"


def ascii_count(text: str, chars: bytes) -> int:
    """How many characters of the text are among the ASCII `chars`. Counted on the UTF-8 bytes by
    bytes.translate, in C (an ASCII byte in UTF-8 is always that ASCII character): a cheap bound that
    spares a Unicode-aware count whenever the bound already settles the question."""
    data = text.encode("utf-8", "surrogatepass")
    return len(data) - len(data.translate(None, chars))


def char_weight(ch: str) -> float:
    """A CJK character carries roughly as much text as two or three Latin letters."""
    return 2.0 if is_wide(ch) else 1.0


def weighted_len(text: str) -> float:
    return float(len(text) + wide_count(text))


def visible(text: str) -> str:
    """The text without whitespace and zero-width characters."""
    if text.isascii():  # the ASCII blanks deleted from the bytes in one C call (about 14x faster)
        return text.encode("ascii").translate(None, _ASCII_HIDDEN_OR_BLANK).decode("ascii")
    return _HIDDEN_OR_BLANK.sub("", text)


_ASCII_HIDDEN_OR_BLANK = bytes(c for c in map(ord, WHITE_SPACE + "".join(INVISIBLE)) if c < 128)


@lru_cache(maxsize=4096)
def script_of(ch: str) -> str:
    """A coarse script name for a letter, or '' for anything that is not a letter."""
    if not ch.isalpha():
        return ""
    code = ord(ch)
    if code < 0x250 or 0x1E00 <= code < 0x1F00:
        return "Latin"
    if 0x370 <= code < 0x400 or 0x1F00 <= code < 0x2000:
        return "Greek"
    if 0x400 <= code < 0x530:
        return "Cyrillic"
    if 0x530 <= code < 0x590:
        return "Armenian"
    if 0x590 <= code < 0x600:
        return "Hebrew"
    if 0x600 <= code < 0x780 or 0x8A0 <= code < 0x900 or 0xFB50 <= code < 0xFE00 or 0xFE70 <= code < 0xFF00:
        return "Arabic"
    if 0x900 <= code < 0xE00:
        return "Indic"
    if 0xE00 <= code < 0xE80:
        return "Thai"
    if 0x1000 <= code < 0x10A0:
        return "Myanmar"
    if 0x10A0 <= code < 0x1100:
        return "Georgian"
    if 0x1100 <= code < 0x1200 or 0xAC00 <= code < 0xD7B0 or 0x3130 <= code < 0x3190:
        return "Hangul"
    if 0x3040 <= code < 0x3100 or 0x31F0 <= code < 0x3200 or 0xFF66 <= code < 0xFFA0:
        return "Kana"
    if 0x3400 <= code < 0xA000 or 0xF900 <= code < 0xFB00 or 0x20000 <= code < 0x30000 or code == 0x3007:
        return "Han"
    if 0xFF21 <= code < 0xFF5B:
        return "Latin"  # full-width Latin
    if 0x1D400 <= code < 0x1D800:
        return "Math"
    name = unicodedata.name(ch, "")
    return name.split(" ", 1)[0].title() if name else "Other"


def cjk_ratio(text: str) -> float:
    if text.isascii():
        return 0.0
    cjk = len(_CJK_LETTER.findall(text))
    if not cjk:
        return 0.0  # (without counting the letters)
    letters = len(_NOT_LETTER.sub("", text))
    if not letters:
        return 0.0
    return cjk / letters


def compression_ratio(text: str) -> float:
    """Raw UTF-8 size over zlib-compressed size (Whisper's repetition signal uses gzip, > 2.4)."""
    raw = text.encode("utf-8")
    if not raw:
        return 0.0
    return len(raw) / len(zlib.compress(raw, 9))


@dataclass(frozen=True)
class Run:
    """`count` copies of one character starting at `start`."""

    char: str
    start: int
    count: int

    @property
    def end(self) -> int:
        return self.start + self.count


def char_runs(text: str, min_count: int = 2) -> list[Run]:
    """Runs of one character repeated at least `min_count` times, in text order."""
    if min_count >= 2 and not _may_repeat_a_character(text, min_count):
        return []
    pattern = _same_char_run(max(min_count - 1, 0))
    return [Run(m.group(1), m.start(), m.end() - m.start()) for m in pattern.finditer(text)]


def _may_repeat_a_character(text: str, count: int) -> bool:
    """False when no character occurs `count` times in a row. The pattern of `char_runs` starts a match
    at every position; here each character's code is compared with the next one's in one XOR (in C),
    and a run shows as count - 1 zero bytes (codes shared by several characters only let more pass)."""
    codes, _exact = _char_codes(text)
    whole = int.from_bytes(codes, "big")
    return bytes(count - 1) in (whole ^ (whole >> 8)).to_bytes(len(codes), "big")


@lru_cache(maxsize=16)
def _same_char_run(more: int) -> re.Pattern[str]:
    return re.compile(r"(.)\1{" + str(more) + ",}", re.DOTALL)


@dataclass(frozen=True)
class Repeat:
    """A stretch `text[start:end]` made of consecutive copies of a unit of `period` characters."""

    start: int
    end: int
    period: int
    unit: str

    @property
    def copies(self) -> float:
        return (self.end - self.start) / self.period


def smallest_period(unit: str) -> int:
    """The primitive period of a string (KMP failure function)."""
    fail = [0] * len(unit)
    k = 0
    for i in range(1, len(unit)):
        while k and unit[i] != unit[k]:
            k = fail[k - 1]
        if unit[i] == unit[k]:
            k += 1
        fail[i] = k
    p = len(unit) - fail[-1] if unit else 0
    return p if p and len(unit) % p == 0 else len(unit)


def tandem_repeats(text: str, max_period: int = 160, min_copies: float = 2.0) -> list[Repeat]:
    """Maximal periodic stretches with a primitive unit of 2..max_period characters.

    Period 1 is left to `char_runs`. A stretch counts when text[i] == text[i + p] holds for at least
    (min_copies - 1) * p consecutive positions. Each character becomes a one-byte code, and for every
    period the text is compared with itself shifted by p in one big-integer XOR: the zero bytes are the
    equal positions, and a bytes search finds their runs. The work per period is in C (a few
    microseconds for a 600-character text); the periods that need many equal positions are tried only
    where an aligned block of the text recurs (`_periods_to_try`). Beyond Latin-1 a code stands for
    several characters, so a run found with such codes is checked against the text itself.
    """
    n = len(text)
    top = min(max_period, n // 2)
    codes, exact = _char_codes(text)
    whole = int.from_bytes(codes, "big")
    needed = _needs(min_copies, max_period)
    found: list[Repeat] = []
    for p in _periods_to_try(text, top, min_copies):
        need, zeros = needed[p]
        # Byte k of the XOR is codes[k] ^ codes[k - p] for k >= p (the first p bytes keep their own
        # codes and are never searched): position k stands for k - p.
        equal = (whole ^ (whole >> (8 * p))).to_bytes(n, "big")
        if zeros not in equal:
            continue  # no stretch of `need` equal positions at this period
        for run in _zero_runs(need).finditer(equal, p):
            first, last = run.span()
            if exact or text[first:last] == text[first - p : last - p]:
                spans: Iterable[tuple[int, int]] = ((first, last),)
            else:
                spans = _equal_runs(text, p, first, last, need)
            for first, last in spans:
                start = first - p
                unit = text[start:first]
                if (unit + unit).find(unit, 1) == p:  # primitive: not a repeat of a shorter unit
                    found.append(Repeat(start, last, p, unit))
    return found


def _char_codes(text: str) -> tuple[bytes, bool]:
    """One byte per character, equal for equal characters, and whether different characters always get
    different bytes. A Latin-1 text is its own encoding (ASCII known from a flag of the string, with no
    scan); any other text gets the low byte of each code point, in C."""
    if text.isascii():
        return text.encode("ascii"), True
    try:
        return text.encode("latin-1"), True
    except UnicodeEncodeError:
        return text.encode("utf-32-le", "surrogatepass")[::4], False


def _equal_runs(text: str, period: int, first: int, last: int, need: int) -> list[tuple[int, int]]:
    """The maximal runs of `need` or more positions k in first..last-1 with text[k] == text[k - period]."""
    runs: list[tuple[int, int]] = []
    begin = -1
    for k in range(first, last):
        if text[k] == text[k - period]:
            if begin < 0:
                begin = k
        elif begin >= 0:
            if k - begin >= need:
                runs.append((begin, k))
            begin = -1
    if begin >= 0 and last - begin >= need:
        runs.append((begin, last))
    return runs


_BLOCK = 8
_MAX_BLOCK_FINDS = 250


def _equal_positions_needed(period: int, min_copies: float) -> int:
    return max(int((min_copies - 1) * period), 1)


def _periods_to_try(text: str, top: int, min_copies: float) -> Sequence[int]:
    """The periods 2..top, in order, that can hold a stretch of the needed number of equal positions.

    That number never falls as the period grows, so the periods needing fewer than 2 * _BLOCK - 1 are
    a leading range and all of them are tried; after it only the distances of `_block_recurrences`
    can have a stretch. Looping over the listed periods alone spares a Python step for each of the
    (mostly skipped) others.
    """
    first_long = 2
    while first_long <= top and _equal_positions_needed(first_long, min_copies) < 2 * _BLOCK - 1:
        first_long += 1
    if first_long > top:
        return range(2, top + 1)
    candidates = _block_recurrences(text, top)
    if candidates is None:
        return range(2, top + 1)
    return [*range(2, first_long), *sorted(d for d in candidates if d >= first_long)]


def _block_recurrences(text: str, limit: int) -> set[int] | None:
    """Distances (up to `limit`) at which one of the text's aligned _BLOCK-character blocks
    (text[0:8], text[8:16], ...) occurs again; None when there are too many to be worth listing (a loop).

    A stretch of 2 * _BLOCK - 1 or more equal positions at period p contains a whole aligned block,
    which therefore occurs again p characters later: periods that need that many equal positions and
    are not listed cannot have one. Each look-up is one str.find in C.
    """
    distances: set[int] = set()
    finds = 0
    find = text.find
    for start in range(0, len(text) - _BLOCK + 1, _BLOCK):
        block = text[start : start + _BLOCK]
        end = start + limit + _BLOCK  # (str.find stops at the text's end)
        pos = find(block, start + 1, end)
        while pos >= 0:
            finds += 1
            if finds > _MAX_BLOCK_FINDS:
                return None
            distances.add(pos - start)
            pos = find(block, pos + 1, end)
    return distances


@lru_cache(maxsize=16)
def _needs(min_copies: float, max_period: int) -> tuple[tuple[int, bytes], ...]:
    """For each period up to max_period (the index): the equal positions a stretch needs, and that many
    zero bytes (looked up once per text instead of computed per period)."""
    needs = [_equal_positions_needed(p, min_copies) for p in range(max_period + 1)]
    return tuple((need, bytes(need)) for need in needs)


@lru_cache(maxsize=256)
def _zero_runs(need: int) -> re.Pattern[bytes]:
    return re.compile(b"\\x00{%d,}" % need)


def repeated_ngram_coverage(text: str, n: int, window_start: int = 0) -> tuple[float, int]:
    """Share of characters in text[window_start:] covered by a character n-gram seen earlier.

    Returns (coverage, first covered index). An n-gram counts as repeated when the same n characters
    occurred at an earlier position anywhere in the text (overlap allowed, so loops of short units count).
    """
    length = len(text) - window_start
    if length <= 0 or len(text) < 2 * n:
        return 0.0, -1
    count = len(text) - n + 1
    lo = max(0, window_start - n + 1)  # n-grams ending before the window cover nothing in it
    candidates = _repeat_candidates(text, n, lo, count)
    if candidates is None:
        flagged = _repeated_ngrams(text, n, lo, count)
    else:
        # text.find gives an n-gram's first occurrence: before i means it was seen earlier
        flagged = (i for i in candidates if text.find(text[i : i + n]) < i)
    covered_until = -1
    covered = 0
    first_index = -1
    for i in flagged:
        if text[i : i + n].isspace():
            continue  # blank stretches (blanked layout, indentation) are not repeated text
        lo_i = max(i, window_start, covered_until)
        hi = i + n
        if hi > lo_i:
            covered += hi - lo_i
            covered_until = hi
            if first_index < 0:
                first_index = lo_i
    return covered / length, first_index


def _repeated_ngrams(text: str, n: int, lo: int, count: int) -> Iterator[int]:
    """Positions lo..count-1 whose n-gram occurred at an earlier position, in order."""
    first_seen: dict[str, int] = {}
    remember = first_seen.setdefault  # the position of an n-gram's first occurrence
    for i in range(lo):
        remember(text[i : i + n], i)
    for i in range(lo, count):
        if remember(text[i : i + n], i) != i:
            yield i


def _repeat_candidates(text: str, n: int, lo: int, count: int) -> list[int] | None:
    """Positions lo..count-1 that may hold a repeated n-gram, in order; None when too many to check
    one by one. The positions from lo on are cut into blocks of (n + 1) // 2 characters; every n-gram
    there holds a whole block, and a repeated n-gram's blocks occurred earlier too. So only n-grams
    around a block that occurred earlier (text.find, in C) can be repeats."""
    size = (n + 1) // 2
    positions: set[int] = set()
    for block_start in range(lo, len(text) - size + 1, size):
        if text.find(text[block_start : block_start + size]) < block_start:
            positions.update(range(max(lo, block_start + size - n), min(count, block_start + 1)))
            if len(positions) > _MAX_CANDIDATES:
                return None
    return sorted(positions)


_MAX_CANDIDATES = 120


def ends_in_repetition(text: str, lines: int = 3) -> bool:
    """The last `lines` non-blank lines all appeared earlier (the very last may be a cut-off prefix of an
    earlier line): the text stops while still repeating, instead of closing with something new."""
    rows = [row.strip() for row in text.splitlines() if row.strip()]
    if len(rows) <= lines:
        return False
    *_, last = rows
    earlier = rows[:-1]
    if not any(row.startswith(last) for row in earlier):
        return False
    return all(rows[i] in rows[:i] for i in range(len(rows) - lines, len(rows) - 1))


def novel_word_share(text: str, start: int) -> float:
    """Share of the words in text[start:] that the text had not used before them (case-folded):
    near zero when a text only recombines what it already said, as loops with small variations do."""
    if text.isascii():  # ASCII case-folding is lower-casing, which keeps each character's \w-ness
        words = _WORD_RUN.findall(text.lower())
    else:
        words = [w.casefold() for w in _WORD_RUN.findall(text)]
    # words that begin before `start` (one running across it included) are the words used before
    before = len(_WORD_RUN.findall(text, 0, start)) if start > 0 else 0
    after = words[before:]
    if not after:
        return 0.0
    # each word new to the text counts once, at its first use after `start`
    return len(set(after).difference(words[:before])) / len(after)


_WORD_RUN = re.compile(r"\w+")
