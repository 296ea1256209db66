"""Patterns moved from the `regex` module to the faster `re` engine match exactly what they matched."""

from __future__ import annotations

import sys

import regex

from k26ctl.smoke import textstats, wordstats
from k26ctl.smoke.wordsignals import _MARKUP, _MARKUP_WITHOUT_EMAIL, blank_markup


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
