"""The smoke page's section on how the accept length was judged: every mark of the document's
`accept_rule`, the prior run, the warnings; hostile strings stay text; absent without a rule."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.report.hostile import fixture

pytest.importorskip("matplotlib", reason="the report extra (matplotlib) is not installed")

from k26ctl.report import page_html

PAYLOAD = "<script>alert('rule')</script>"


def with_rule(prior_source: str = "this host's deploy history") -> dict[str, Any]:
    doc = fixture("smoke-patched.json")
    doc["accept_length"] = 1.4
    doc["accept_rule"] = {
        "algorithm": "DDTREE",
        "longest": 8.0,
        "low_below": 2.75,
        "nothing_accepted_at": 1.05,
        "floor": None,
        "prior": {
            "accept_length": 3.2,
            "when": "2026-12-05T08:00:00",
            "source": prior_source,
            "collapse_at": 2.1,
        },
    }
    doc["warnings"] = ["accept length 1.40 over this run's requests is low (expected up to 8 for DDTREE)"]
    return doc


def section(page: str) -> str:
    start = page.index("How the accept length was judged")
    return page[start : page.index("</table>", start)]


def test_every_mark_of_the_rule_is_shown_with_its_meaning() -> None:
    page = page_html(with_rule())
    shown = section(page)
    for mark, value in (("expected up to", "8.00"), ("low below", "2.75"), ("nothing accepted at", "1.05")):
        assert re.search(rf"<td>{mark}</td><td>{re.escape(value)}</td>", shown), mark
    assert "<td>collapse at</td><td>2.10</td>" in shown
    assert "<td>floor</td>" not in shown  # no floor was set: no row for it
    assert "DDTREE: 1.40 tokens per verify pass" in page
    assert "prior run: 3.20 on 2026-12-05T08:00:00 (this host&#39;s deploy history)" in page
    assert "is low (expected up to 8 for DDTREE)" in page


def test_hostile_strings_in_the_rule_stay_text() -> None:
    page = page_html(with_rule(prior_source=PAYLOAD))
    assert PAYLOAD not in page and "&lt;script&gt;alert(&#39;rule&#39;)&lt;/script&gt;" in page


def test_no_rule_no_section() -> None:
    assert "How the accept length was judged" not in page_html(fixture("smoke-patched.json"))
