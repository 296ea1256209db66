"""Patterns rewritten for speed (moved to the faster `re` engine, or led by a character class) match
exactly what they matched before."""

from __future__ import annotations

import random
import re
import sys

import regex

from k26ctl.smoke import restarts, textstats, wordstats
from k26ctl.smoke.detectors import words
from k26ctl.smoke.markup import _MARKUP, _MARKUP_WITHOUT_EMAIL, blank_markup


def test_white_space_is_the_regex_modules_blank_class() -> None:
    blank = regex.compile(r"\s")
    expected = {chr(c) for c in range(sys.maxunicode + 1) if blank.match(chr(c))}
    assert set(textstats.WHITE_SPACE) == expected
    # the re module's \s also takes the information separators; visible() keeps them, as before
    assert textstats.visible("a\x1cb \u3000c\u200bd\n") == "a\x1cbcd"


def test_ascii_words_split_like_the_unicode_pattern() -> None:
    samples = [
        "don't stop-it now'' 'quoted' x86_64 a1b2 O'Neil's rock'n'roll",
        "tabs\tand\nlines, snake_case and dots.in.names",
    ]
    for text in samples:
        expected = [(m.group(), m.start(), m.end()) for m in wordstats._WORD.finditer(text)]
        assert [(w.text, w.start, w.end) for w in wordstats.words_of(text)] == expected
        assert all(w.script == "Latin" and not w.mixed for w in wordstats.words_of(text))


def test_markup_without_an_at_sign_is_blanked_the_same_way() -> None:
    text = "see https://x.org/a and `code` or snake_case.attr [INST] <|im_end|> done"
    assert "@" not in text
    blank = lambda m: " " * len(m.group())  # noqa: E731
    assert _MARKUP_WITHOUT_EMAIL.sub(blank, text) == _MARKUP.sub(blank, text) == blank_markup(text)
    with_mail = "mail me at someone@example.com today"
    assert "someone@example.com" not in blank_markup(with_mail)


def test_abbreviation_pattern_led_by_a_letter_blanks_what_the_original_did() -> None:
    import random
    import re

    from k26ctl.smoke.detectors.words import _ABBREVIATION

    original = re.compile(r"\b(?:[A-Za-z]\.){2,}|\b[A-Z]\.(?=\s+[A-Z])|(?<![\w.])[A-Z][:.)](?=\s)")
    blank = lambda m: " " * len(m.group())  # noqa: E731
    pick = random.Random(7)
    alphabet = "aBzQ.:) \n\t_1é"
    samples = ["e.g. U.S. and J. Smith; Q: yes A) no B. maybe x.y.z.", "the U.S.A. and i.e.: fine"]
    samples += ["".join(pick.choice(alphabet) for _ in range(pick.randint(0, 40))) for _ in range(20_000)]
    for text in samples:
        assert _ABBREVIATION.sub(blank, text) == original.sub(blank, text), text


def _every_character() -> str:
    return "".join(chr(c) for c in range(sys.maxunicode + 1))


def test_str_split_removes_what_the_blank_pattern_removes() -> None:
    import re

    text = _every_character()
    assert "".join(text.split()) == re.sub(r"\s+", "", text)


def test_ascii_count_counts_only_the_given_ascii_characters() -> None:
    text = "ab1 ÄéΩ７٣ 語 \ud800x9"  # accented, full-width and Arabic-Indic digits, a lone surrogate
    assert textstats.ascii_count(text, textstats.ASCII_ALNUM) == 5  # a, b, 1, x, 9
    assert textstats.ascii_count(text, textstats.ASCII_DIGITS) == 2
    assert textstats.ascii_count("", textstats.ASCII_DIGITS) == 0


def test_the_cheap_counts_bound_the_unicode_counts() -> None:
    import random

    from k26ctl.smoke.detectors.characters import _NOT_CONTENT
    from k26ctl.smoke.kinds import _NOT_ALNUM, _NOT_DIGIT, _digits_at_most

    pick = random.Random(11)
    alphabet = "aZ09 .-_|é٣７語ⅷ²\u0301\U0001f600\ud800"
    samples = [_every_character()]
    samples += ["".join(pick.choice(alphabet) for _ in range(pick.randint(0, 30))) for _ in range(5_000)]
    for text in samples:
        ascii_alnum = textstats.ascii_count(text, textstats.ASCII_ALNUM)
        # a lower bound of both the \w-minus-underscore count and the letters-and-numbers count
        assert ascii_alnum <= len(_NOT_ALNUM.sub("", text))
        assert ascii_alnum <= len(_NOT_CONTENT.sub("", text))
        assert _digits_at_most(text) >= len(_NOT_DIGIT.sub("", text))


def test_single_spacing_by_split_equals_the_substitution() -> None:
    import random
    import re

    from k26ctl.smoke.detectors.loops import _single_spaced

    pick = random.Random(5)
    alphabet = ["a", "b", " ", "\n", "\t", "\u3000", "\x1c", "\x85", "\xa0", "\u200b", "é"]
    samples = [_every_character(), "", " ", " a  b ", "a\n\nb\t"]
    samples += ["".join(pick.choice(alphabet) for _ in range(pick.randint(0, 12))) for _ in range(20_000)]
    for text in samples:
        assert _single_spaced(text) == re.sub(r"\s+", " ", text).rstrip(), repr(text)


def _tandem_by_hand(text: str, max_period: int, min_copies: float) -> list[tuple[int, int, int, str]]:
    """tandem_repeats' definition, character by character (slow, plain)."""
    found = []
    for p in range(2, min(max_period, len(text) // 2) + 1):
        need = max(int((min_copies - 1) * p), 1)
        k = p
        while k < len(text):
            if text[k] != text[k - p]:
                k += 1
                continue
            begin = k
            while k < len(text) and text[k] == text[k - p]:
                k += 1
            unit = text[begin - p : begin]
            if k - begin >= need and (unit + unit).find(unit, 1) == p:
                found.append((begin - p, k, p, unit))
    return found


def test_tandem_repeats_beyond_latin_1_finds_only_equal_characters() -> None:
    # Beyond Latin-1 the search codes a character by the low byte of its code point: these characters
    # all share a code with another one (0x00: NUL, U+0100, U+4E00, U+1F600, a lone surrogate; 0x01;
    # 0x41: "A", U+0141, U+4E41), so repeats of codes that are not repeats of characters must go.
    groups = ["\x00\u0100\u4e00\U0001f600\ud800", "\x01\u4e01", "A\u0141\u4e41", " ", "b"]
    alphabet = "".join(groups)
    partner = {ch: group for group in groups for ch in group}
    rng = random.Random(26)
    for _ in range(600):
        unit = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12)))
        chars = list(unit * rng.randint(1, 6))
        for _ in range(rng.randint(0, 3)):  # a character swapped for one with the same code
            k = rng.randrange(len(chars))
            chars[k] = rng.choice(partner[chars[k]])
        noise = lambda: "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))  # noqa: E731
        text = noise() + "".join(chars) + noise()
        for max_period, min_copies in ((160, 2.0), (6, 3.0)):
            got = [
                (r.start, r.end, r.period, r.unit)
                for r in textstats.tandem_repeats(text, max_period, min_copies)
            ]
            assert got == _tandem_by_hand(text, max_period, min_copies), repr(text)
    # the codes 00 01 00 01 repeat, the characters do not
    assert textstats.tandem_repeats("\u4e00\u4e01\u0100\u0101") == []
    assert [(r.start, r.end, r.unit) for r in textstats.tandem_repeats("\u4e00\u4e01\u4e00\u4e01")] == [
        (0, 4, "\u4e00\u4e01")
    ]


def test_visible_of_an_ascii_text_removes_what_the_pattern_removes() -> None:
    every_ascii = "".join(map(chr, range(128)))
    for text in (every_ascii, "  indented\tcode\r\n\x0b\x0c x\x1cy  ", ""):
        assert textstats.visible(text) == textstats._HIDDEN_OR_BLANK.sub("", text)


def test_char_runs_prefilter_never_hides_a_run() -> None:
    # characters with the same low byte of their code point share a code in the prefilter
    alphabet = "a\x00\u0100\u4e00\U0001f600\u0161\u4e61 "
    rng = random.Random(5)
    for _ in range(2000):
        text = "".join(rng.choice(alphabet) * rng.choice((1, 1, 2, 3, 5)) for _ in range(rng.randint(0, 12)))
        for count in (2, 3, 5):
            pattern = textstats._same_char_run(count - 1)
            expected = [(m.group(1), m.start(), m.end() - m.start()) for m in pattern.finditer(text)]
            assert [(r.char, r.start, r.count) for r in textstats.char_runs(text, count)] == expected


def test_item_number_pattern_led_by_a_digit_matches_what_the_look_behind_one_did() -> None:
    original = re.compile(r"(?<!\d)(\d{1,3})\s*[.):\uff0e\u3001]")
    rng = random.Random(11)
    alphabet = "0123456789 .):\uff0e\u3001a\n\u0663"  # (U+0663: an Arabic-Indic digit, \d too)
    samples = ["1. one\n2) two\n10: ten\n1234. no\nv2.0 and 3.14", "\u0661\u3001 x \u0662\uff0e y"]
    samples += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 16))) for _ in range(20000)]
    for text in samples:
        expected = [(m.group(1), m.span()) for m in original.finditer(text)]
        assert [(m.group(1), m.span()) for m in restarts._ITEM_NUMBER.finditer(text)] == expected


def test_latin_word_pattern_led_by_a_letter_matches_what_the_look_behind_one_did() -> None:
    original = re.compile(r"(?<![0-9A-Za-z])[A-Za-z]+(?:['\u2019][A-Za-z]+)?")
    rng = random.Random(12)
    alphabet = "abZ09 '\u2019-_\n\u00e9\u0430"
    samples = ["don't x86 a1b2 O\u2019Neil's rock'n'roll 3x 500g caf\u00e9s _id"]
    samples += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 16))) for _ in range(20000)]
    for text in samples:
        expected = [(m.group(), m.span()) for m in original.finditer(text)]
        assert [(m.group(), m.span()) for m in words._LATIN_WORD.finditer(text)] == expected
