"""URL credentials are hidden in rendered values by a scan that is linear in the value's length; it
hides exactly what the regular expression it replaced hid (that expression is the oracle here)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from k26ctl.render import redact_url_credentials
from tests.support.redaction_oracle import old_redact_url_credentials as oracle
from tests.support.tiers import examples

pieces = st.sampled_from(["a", "Z", "1", "+", ".", "-", ":", "/", "@", " ", "\t", "\u00e9", "://", "u:p@"])
values = st.lists(pieces, max_size=40).map("".join)


@settings(max_examples=examples(2000), derandomize=True)
@given(values)
def test_the_scan_hides_what_the_regular_expression_hid(value: str) -> None:
    assert redact_url_credentials(value) == oracle(value)


def test_credentials_in_urls_are_hidden() -> None:
    assert redact_url_credentials("https://user:hunter2@host/x") == "https://user:***@host/x"
    assert redact_url_credentials("redis://:pw@h") == "redis://:***@h"
    assert redact_url_credentials("a=https://tok@h b=ftp://a:b@c") == "a=https://***@h b=ftp://a:***@c"
    assert redact_url_credentials("1http://u:p@h") == "1http://u:***@h"  # the scheme starts at a letter
    assert redact_url_credentials("no credentials: https://host/path") == "no credentials: https://host/path"


def test_a_long_run_of_letters_is_left_alone() -> None:
    value = "a" * 200_000  # the old expression backtracked over it at every start: quadratic
    assert redact_url_credentials(value) == value
