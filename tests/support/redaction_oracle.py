"""The URL-credential redaction k26ctl/render.py used before its linear scan: a regular expression
tried at every start, quadratic on a long run of letters. The oracle of tests/core/test_redact_urls.py
and the "old" column of benchmarks/render_large_values.py."""

from __future__ import annotations

import re

from k26ctl.render import REDACTED

OLD_URL_CREDENTIALS = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/@\s]+)@")


def old_redact_url_credentials(value: str) -> str:
    def hide(match: re.Match[str]) -> str:
        user, sep, _secret = match.group("userinfo").partition(":")
        return f"{match.group('scheme')}{user}:{REDACTED}@" if sep else f"{match.group('scheme')}{REDACTED}@"

    return OLD_URL_CREDENTIALS.sub(hide, value)
