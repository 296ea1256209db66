"""Secrets out of what doctor collects: API keys and tokens in journal lines, unit text, server args.

SGLang logs its whole `ServerArgs(...)` at start-up, `api_key='...'` included; a unit may hold
`--api-key VALUE` or an `Environment=` secret; `/server_info` returns `api_key`. Values of the profile's
environment whose names look secret are also replaced wherever they appear verbatim.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from k26ctl.render import REDACTED, SECRET_FLAGS, is_secret_env_name, redact_argv, redact_url_credentials

if TYPE_CHECKING:
    from k26ctl.profile import Profile

# name=value / name: value pairs whose name looks secret (api_key='x', "hf_token": "y", password=z)
_SECRET_PAIR = re.compile(
    r"(?P<name>\b[\w.-]*(?:api[_-]?key|token|secret|passw(?:or)?d|credential|cookie)[\w.-]*)"
    r"(?P<sep>['\"]?\s*[=:]\s*)(?P<quote>['\"]?)(?P<value>[^'\",\s)}\]]+)",
    re.IGNORECASE,
)
_BEARER = re.compile(r"(Bearer\s+)[A-Za-z0-9._~+/=-]+", re.IGNORECASE)
_FLAG_VALUE = re.compile(
    r"(?P<flag>" + "|".join(re.escape(f) for f in sorted(SECRET_FLAGS)) + r")(?P<sep>[= ]+)(?P<value>\S+)"
)


def _known_values(profile: Profile | None) -> list[str]:
    if profile is None:
        return []
    env = profile.service.environment
    return sorted((v for k, v in env.items() if is_secret_env_name(k) and len(v) >= 4), key=len, reverse=True)


def text(line: str, profile: Profile | None = None) -> str:
    for value in _known_values(profile):
        line = line.replace(value, REDACTED)
    line = _SECRET_PAIR.sub(
        lambda m: (
            m.group(0)
            if m.group("value") in (REDACTED, "None", "null")
            else f"{m.group('name')}{m.group('sep')}{m.group('quote')}{REDACTED}"
        ),
        line,
    )
    line = _BEARER.sub(lambda m: m.group(1) + REDACTED, line)
    line = _FLAG_VALUE.sub(
        lambda m: (
            (m.group("value").startswith("${") and m.group(0))
            or f"{m.group('flag')}{m.group('sep')}{REDACTED}"
        ),
        line,
    )
    return redact_url_credentials(line)


def unit_text(unit: str, profile: Profile | None = None) -> str:
    out = []
    for line in unit.splitlines():
        key, sep, rest = line.partition("=")
        if sep and key.strip() == "Environment":
            out.append(f"{key}={_environment(rest)}")
        elif sep and key.strip() == "ExecStart":
            try:
                argv = shlex.split(rest)
            except ValueError:
                out.append(text(line, profile))
                continue
            out.append(f"{key}={shlex.join(redact_argv(argv))}")
        else:
            out.append(text(line, profile))
    return "\n".join(out) + ("\n" if unit.endswith("\n") else "")


def _environment(rest: str) -> str:
    try:
        words = shlex.split(rest)
    except ValueError:
        return REDACTED
    shown = []
    for word in words:
        name, sep, value = word.partition("=")
        shown.append(f"{name}={REDACTED}" if sep and is_secret_env_name(name) and value else text(word))
    return " ".join(shlex.quote(w) for w in shown)


def mapping(data: Mapping[str, Any]) -> dict[str, Any]:
    """A shallow copy with secret-named keys replaced and every string value scrubbed."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if is_secret_env_name(str(key)) and value not in (None, "", [], {}):
            out[key] = REDACTED
        elif isinstance(value, str):
            out[key] = text(value)
        else:
            out[key] = value
    return out
