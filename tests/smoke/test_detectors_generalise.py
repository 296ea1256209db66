"""Detectors whose evidence holds for any text of a kind: each catches the shape it names and spares
the healthy text that comes closest to it. Texts here are written for the tests; real labelled outputs
are measured by benchmarks/detector_cv.py."""

from __future__ import annotations

import pytest

from k26ctl.smoke.detectors import run_detector, score_text
from k26ctl.smoke.detectors.registry import limits
from k26ctl.smoke.kinds import PROFILES

PROSE = PROFILES["prose"]


def fired(name: str, text: str, prompt: str | None = None, kind: str | None = None) -> bool:
    return any(f.severity == "fail" for f in run_detector(name, text, prompt=prompt, kind=kind))


def test_cjk_token_soup_versus_chinese_with_english_terms() -> None:
    soup = "他们说卫驳wróci反腐團注明ilma爽graph斗开工essovlGENER粘退出kwarzt洞扩大"
    assert fired("cjk_token_soup", soup)
    assert not fired("cjk_token_soup", "我们使用Python和API来处理数据。然后用SQL查询。结果保存在GitHub上。")
    assert not fired("cjk_token_soup", "The plain English sentence has no CJK at all.")


def test_cjk_glued_to_numbers_in_code_versus_chinese_values() -> None:
    code = 'version = "^接收3.0.1"\nself.tokens = 充0\nrate_limit=一枝2.0\nfloat_value = 去打3\n'
    assert fired("cjk_in_code", code)
    assert not fired("cjk_in_code", "title: 第3章\nchapter: 第4章\nprice = 100\nname = 'Zhang'\n")
    assert not fired("cjk_in_code", "这本书共有12章。第3章讲的是价格=100元的商品。第4章讲的是数量+5的变化。")


def test_crossed_brackets_versus_links_intervals_and_labels() -> None:
    assert fired("crossed_brackets", "var (button-0, item: ] (input has a class](new-employee}-admin")
    assert fired("crossed_brackets", "g: { { { } { } } ] { ] } } , ( { field = {} field")
    fine = "See [the docs](https://example.com/a_(b)) for x in [0, 1); a) first, b) second :) done."
    assert not fired("crossed_brackets", fine, kind="prose")
    assert not fired("crossed_brackets", "}\n  return x;\n}\n", kind="code")  # an excerpt from inside a block
    assert not fired("crossed_brackets", "call('\\x1b[H') and fmt('%s}') and `a(b]`", kind="prose")
    art = " [__][__][(******)__][__](******)[__][]\n [][__][__(******)][__][_(******)_][__]\n" * 3
    assert not fired("crossed_brackets", art, kind="art")


def test_count_gap_versus_counts_with_their_own_step() -> None:
    assert fired("count_gap", "\n".join(str(n) for n in (1, 3, 5, 6, 8, 10, 11, 12, 13, 14, 15)))
    assert not fired("count_gap", "\n".join(str(n) for n in range(1, 21)))
    assert not fired("count_gap", "\n".join(str(n) for n in range(1, 30, 2)))  # odd numbers
    assert not fired("count_gap", "\n".join(str(n) for n in (1, 1, 2, 3, 5, 8, 13, 21, 34)))  # Fibonacci


def test_symbol_lines_versus_rules_and_code() -> None:
    shards = "2\n\n*\n\n1\n Wal\n_\n-**2\n**\n+\n,\n..1\n<?\nsa\n\\*\n+ '\nMM\n"
    assert fired("symbol_lines", shards)
    ruled = "Intro\n\n---\n\nPart one.\n\n* * *\n\nPart two.\n\n***\n\nThe end.\n\n---\n\nNotes.\n\n---\n"
    assert not fired("symbol_lines", ruled)
    assert not fired("symbol_lines", "int f() {\n  {\n  }\n};\n})\n});\n{\n}\n", kind="code")


def test_punctuation_spam_versus_an_exclamation() -> None:
    assert fired("punctuation_spam", "Hello!! How! can! I!!! help! you! today!?!")
    assert not fired("punctuation_spam", "Wow! that was fast. Can you help me? Sure, I can help you today!")


def test_phrase_loop_with_varying_filler_versus_parallel_clauses() -> None:
    loop = " ".join(
        f"the correct answer is actually **{w}** is incorrect however"
        for w in ("site", "cite", "copy", "site")
    )
    assert fired("phrase_loop", loop + " the correct ans", kind="prose")
    parallel = " ".join(
        f"The Licensee shall not {verb} the Software except as expressly permitted by this Agreement."
        for verb in ("copy", "modify", "distribute", "sublicense", "rent")
    )
    assert not fired("phrase_loop", parallel, kind="prose")


def test_dangling_marker_versus_a_comparison() -> None:
    (finding,) = run_detector("dangling_marker", " The girl is eating a hamburger.<")
    assert finding.excerpt.endswith("hamburger.<")
    assert not fired("dangling_marker", "Use a < b when a is smaller, as in 3 < 5")
    assert not fired("dangling_marker", "Close the tag with </div> and you are done.")


def test_echoed_prompt_loop_versus_a_quoted_prompt() -> None:
    prompt = "Analyze the impact of the pandemic on global economic structures."
    looped = f"{prompt}\n{prompt} In a 1,000-word paper, address the following:\nAnalyze"
    assert fired("prompt_echo", looped, prompt=prompt)
    quoted = f'The user asks: "{prompt}" I should cover trade. As asked ("{prompt}"), here is my analysis.'
    assert not fired("prompt_echo", quoted, prompt=prompt)


def test_repeated_key_counts_per_object_with_other_keys_between() -> None:
    looped = '{"title": "a", "meta": "b", "meta": "c", "h1": "d", "meta": "e"}'
    assert fired("repeated_key", looped)
    records = '[{"id": 1, "name": "a"}, {"id": 2, "name": "b"}, {"id": 3, "name": "c"}]'
    assert not fired("repeated_key", records)


def test_sentencepiece_marker_alone_versus_a_bar_chart() -> None:
    assert fired("tokenizer_leak", "It reflects the ideas it evokes.▁▁I've also included notes at the end.")
    assert not fired("tokenizer_leak", "Load over the day: ▁▂▃▅▇▅▃▂▁ peak at noon, ▁low at night.")


@pytest.mark.parametrize(
    ("text", "caught"),
    [
        ("the act of observing a a peaceful environment", True),
        ("He held a compass compass. The compass compass was a mystery to him.", True),
        ("Option a a is the first letter pair in the table.", True),
        ("Choose between A A and B B in the grid.", False),
        # one doubled content word is what a near-tie flip on a healthy server can write ("user user")
        ("We should answer answer B, then check the other options once more.", False),
        ("LPOVERLAPPED lpOverlapped;\nDWORD count;", False),
        ("-rwsr-xr-x 1 root root 30736 2007-01-31 /bin/ping", False),
        ("## make\n\nmake\n    make install", False),
    ],
)
def test_doubled_article_and_doubled_words(text: str, caught: bool) -> None:
    assert fired("stutter", text) is caught


def test_stutter_threshold_comes_from_the_registry() -> None:
    assert limits("stutter") == {"min_events": 2}
    assert score_text("He held a compass compass. The compass compass was a mystery to him.").degenerate
