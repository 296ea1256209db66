"""Unit tests for layout and technical text that must not look degenerate: aligned columns, text
table borders, repeated dates and links, command lines with one-letter options, nested numbered
contents, CJK lists. Every text here is synthetic (written for the tests)."""

# ruff: noqa: RUF001 - CJK punctuation is the point of several cases
from __future__ import annotations

from k26ctl.smoke.detectors import score_text
from k26ctl.smoke.detectors.characters import detect_char_runs
from k26ctl.smoke.detectors.loops import detect_tail_repeat
from k26ctl.smoke.detectors.scripts import detect_script_mix
from k26ctl.smoke.detectors.words import detect_gibberish, detect_non_words
from k26ctl.smoke.kinds import PROFILES, guess_kind
from k26ctl.smoke.restarts import enumeration_restart

PROSE = PROFILES["prose"]


def test_spaces_that_align_words_are_layout_but_spaces_before_symbols_are_not() -> None:
    aligned = "GNU Wget\n" + " " * 60 + "-*- text -*-\nWget is a free utility for downloading files."
    assert detect_char_runs(aligned, PROSE) == []
    junk = "Ten simple steps:!\t\n\n" + " " * 60 + '" $#\n\n!#'
    assert [f.detector for f in detect_char_runs(junk, PROSE)] == ["char_run"]
    assert detect_char_runs("word" + " " * 200 + "word", PROSE)  # beyond any column


def test_text_table_borders_are_layout() -> None:
    table = "+" + "-" * 70 + "+" + "-" * 30 + "+\n| name | value |\n+" + "-" * 70 + "+" + "-" * 30 + "+\n"
    assert detect_char_runs(table, PROSE) == []
    assert detect_char_runs("The answer is" + "-" * 70 + " done.", PROSE)


def test_dates_and_links_that_recur_are_not_a_tail_repeat() -> None:
    dated = "".join(
        f"  * Release {i}: fixed bug number {i * 7} in the parser.\n"
        f" -- Maintainer  Mon, 0{i} Jan 2014 00:00:00 +0100\n\n"
        for i in range(1, 6)
    )
    assert detect_tail_repeat(dated, PROSE) == []
    modules = ("parser", "lexer", "printer", "checker", "loader", "writer")
    linked = "".join(f"The {m} module is documented at https://example.org/project/docs/\n" for m in modules)
    assert detect_tail_repeat(linked, PROSE) == []
    looping = "Sure. " + "we will be there soon, " * 6
    assert detect_tail_repeat(looping, PROSE)


def test_one_letter_options_and_escapes_are_not_fragments() -> None:
    text = (
        "To check the file, run ls -l /bin/ping and look at the mode bits; they read -rwsr-xr-x when the "
        "setuid bit is set. Then run setcap cap_net_raw+ep on the file and remove the bit with chmod u-s, "
        "and the program will still work for users. Tabs are written as \\t and new lines as \\n in the "
        "string, and the function returns x when it succeeds and the error otherwise."
    )
    assert detect_gibberish(text, PROSE) == []
    salad = (
        "Once upon a time each gone t and like to been and sa p I less millions the three is other remaining "
        "more we party in few V the only other end one only really more have S t and here super so Jp now"
    )
    assert [f.detector for f in detect_gibberish(salad, PROSE)][:1] == ["gibberish"]


def test_nested_numbered_contents_are_not_a_restart() -> None:
    toc = (
        "1. [Usage](https://example.org/x#usage)\n"
        "    1. [Install](https://example.org/x#install)\n"
        "    2. [Quickstart](https://example.org/x#quickstart)\n"
        "    3. [Migrating](https://example.org/x#migrating)\n"
        "    4. [Serialize](https://example.org/x#serialize)\n"
        "2. [Types](https://example.org/x#types)\n"
        "    1. [dataclass](https://example.org/x#dataclass)\n"
        "    2. [datetime](https://example.org/x#datetime)\n"
        "    3. [enum](https://example.org/x#enum)\n"
    )
    assert enumeration_restart(toc) is None
    assert not score_text(toc).degenerate


def test_cjk_list_punctuation_separates_words() -> None:
    text = (
        "下面是一些常见字体的名称，按照类型分开列出。\n"
        "无衬线字体：gothic、ゴチック、hei、dodum、gulim、sans。\n"
        "衬线字体：mincho、明朝、song、batang、serif。\n"
        "等宽字体：mono、等幅、courier、fixed。"
    )
    assert detect_script_mix(text, PROFILES["cjk"]) == []


def test_tables_of_string_literals_and_box_tables_have_their_kinds() -> None:
    rows = "".join(
        f"    '\\x{i:02x}'     #  0x{i:02X} -> LATIN CAPITAL LETTER {chr(65 + i % 26)} WITH ACUTE\n"
        for i in range(30)
    )
    assert guess_kind("decoding_table = (\n" + rows + ")\n") == "code"
    box = (
        "\u250c\u2500\u2500\u2500\u2500\u2500\u2500\u252c\u2500\u2500\u2500\u2500\u2510\n"
        "\u2502\u8f6f\u4ef6\u5305\u2502\u5927\u5c0f\u2502\n"
        "\u251c\u2500\u2500\u2500\u2500\u2500\u2500\u253c\u2500\u2500\u2500\u2500\u2524\n"
        "\u2502telnetd \u2502103 \u2502\n"
        "\u2514\u2500\u2500\u2500\u2500\u2500\u2500\u2534\u2500\u2500\u2500\u2500\u2518\n"
    )
    assert guess_kind(box) == "table"


def test_contractions_and_dropped_g_are_english() -> None:
    from k26ctl.smoke.lexicon import is_english_word

    for word in ("it's", "doesn't", "can't", "won't", "they\u2019re", "lookin'", "installer", "reinstall"):
        assert is_english_word(word), word
    assert not is_english_word("xyzq's")
    chatty = (
        "If it's green or it wiggles, it's biology. If it stinks, it's chemistry. If it doesn't work, "
        "it's physics, and if you can't tell, you're probably lookin' at engineering, aren't you?"
    )
    assert detect_gibberish(chatty, PROSE) == []


def test_a_short_answer_made_mostly_of_non_words_is_gibberish() -> None:
    from k26ctl.smoke.lexicon import is_english_word

    assert not is_english_word("hamplaar")
    garbled = "A hamplaar and tha ove trade ind and winer sys, backacmite ha, the pourst of farnel"
    assert "non_words" in [f.detector for f in detect_non_words(garbled, PROSE)]
    named = "We met Anna and Boris in Zurich and walked along the river to the old harbour with friends"
    assert detect_non_words(named, PROSE) == []
    assert detect_gibberish(named, PROSE) == []
