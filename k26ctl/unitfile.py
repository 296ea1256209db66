"""systemd's `ExecStart=`/`Environment=` grammar: quote words so systemd turns them back into exactly
the argv meant, and parse unit text back the way systemd reads it.

systemd rewrites a command line three times before exec (specifiers `%x`, quotes/C escapes, then
`$VAR` expansion), so every word is escaped for all three. The parse-back half lets tests compare both
directions and lets a unit read from a host be compared with the rendered one.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass

from k26ctl.errors import ConfigError

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Words made only of these characters need no quoting in ExecStart= (none is special to systemd).
_PLAIN_WORD = re.compile(r"^[A-Za-z0-9_./:,+=@-]+$")


@dataclass(frozen=True)
class EnvRef:
    """An argv word that systemd must fill from the unit's environment (`${NAME}`)."""

    name: str

    def __str__(self) -> str:
        return "${" + self.name + "}"


def check_text(value: str, where: str) -> str:
    """Refuse what no unit line can carry: line breaks, control characters, unencodable text."""
    for ch in value:
        if ch in "\n\r\t\v\f" or unicodedata.category(ch) in ("Cc", "Cs", "Zl", "Zp"):
            raise ConfigError(
                f"{where} contains a line break or control character ({ch!r})",
                "remove it from the profile value",
            )
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigError(f"{where} is not valid UTF-8 text", "remove the odd character") from None
    return value


def check_env_name(name: str, where: str) -> str:
    if not _ENV_NAME.match(name):
        raise ConfigError(
            f"{where}: {name!r} is not a valid environment variable name", "use [A-Za-z_][A-Za-z0-9_]*"
        )
    return name


# ---- quoting ------------------------------------------------------------------------------------


def quote_exec_word(word: str | EnvRef) -> str:
    """One ExecStart= word that systemd turns back into exactly `word`.

    `%` -> `%%` (specifiers), `$` -> `$$` (environment expansion), and inside double quotes
    `\\` -> `\\\\` and `"` -> `\\"` (C unescaping). An EnvRef renders as `${NAME}` on purpose.
    """
    if isinstance(word, EnvRef):
        return "${" + check_env_name(word.name, "sglang.api_key_env") + "}"
    check_text(word, "an ExecStart word")
    escaped = word.replace("%", "%%").replace("$", "$$")
    if _PLAIN_WORD.match(word):
        return escaped
    return '"' + escaped.replace("\\", "\\\\").replace('"', '\\"') + '"'


def quote_env_assignment(name: str, value: str) -> str:
    """One `Environment=` item. systemd expands specifiers and C escapes here but not `$`."""
    check_env_name(name, "service.environment")
    check_text(value, f"service.environment.{name}")
    text = f"{name}={value}".replace("%", "%%")
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def escape_specifiers(value: str) -> str:
    return value.replace("%", "%%")


# ---- parsing back (the systemd rules, for tests and for diffing a unit read from a host) -------

_C_ESCAPES = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "s": " ",
    "\\": "\\",
    '"': '"',
    "'": "'",
}


def _unescape_at(text: str, i: int) -> tuple[str, int]:
    """C-unescape the sequence starting after the backslash at text[i-1]; returns (char, next index)."""
    if i >= len(text):
        raise ValueError("trailing backslash")
    ch = text[i]
    if ch in _C_ESCAPES:
        return _C_ESCAPES[ch], i + 1
    if ch == "x":
        return chr(int(text[i + 1 : i + 3], 16)), i + 3
    if ch == "u":
        return chr(int(text[i + 1 : i + 5], 16)), i + 5
    if ch == "U":
        return chr(int(text[i + 1 : i + 9], 16)), i + 9
    if ch in "01234567":
        return chr(int(text[i : i + 3], 8)), i + 3
    raise ValueError(f"unknown escape \\{ch}")


def split_exec_words(value: str) -> list[str]:
    """Split an ExecStart= value into words the way systemd does (quotes and C escapes), before
    environment expansion. Specifiers must already be resolved (`%%` -> `%`)."""
    words: list[str] = []
    i, n = 0, len(value)
    while True:
        while i < n and value[i] in " \t\n\r":
            i += 1
        if i >= n:
            return words
        word: list[str] = []
        quote: str | None = None
        while i < n:
            ch = value[i]
            if quote is None and ch in " \t\n\r":
                break
            if ch == "\\":
                decoded, i = _unescape_at(value, i + 1)
                word.append(decoded)
                continue
            if quote is None and ch in "\"'":
                quote = ch
            elif ch == quote:
                quote = None
            else:
                word.append(ch)
            i += 1
        if quote is not None:
            raise ValueError("unterminated quote")
        words.append("".join(word))


def resolve_specifiers(value: str) -> str:
    """`%%` -> `%`; any other specifier is refused (k26ctl never emits one)."""
    out: list[str] = []
    i = 0
    while i < len(value):
        if value[i] == "%":
            if value[i + 1 : i + 2] != "%":
                raise ValueError(f"unexpected specifier in {value!r}")
            out.append("%")
            i += 2
        else:
            out.append(value[i])
            i += 1
    return "".join(out)


_ENV_WORD = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def expand_env_word(word: str, env: Mapping[str, str]) -> list[str]:
    """systemd's exec-time expansion of one word: `$$` -> `$`, `${X}` in place, a whole-word `$X`
    split on whitespace. Unset variables expand to nothing."""
    whole = re.fullmatch(r"\$([A-Za-z_][A-Za-z0-9_]*)", word)
    if whole:
        return env.get(whole.group(1), "").split()

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1) or m.group(2), "")

    return [_ENV_WORD.sub(sub, word)]


def parse_exec_start(value: str, env: Mapping[str, str] | None = None) -> list[str]:
    """The argv systemd would exec for an ExecStart= value (after line joining). argv[0] is the
    executable path, which systemd does not expand."""
    words = split_exec_words(resolve_specifiers(value))
    if not words:
        return []
    argv = [words[0]]
    for word in words[1:]:
        argv.extend(expand_env_word(word, env or {}))
    return argv


def unit_settings(unit_text: str) -> list[tuple[str, str, str]]:
    """(section, key, value) for every setting in a unit, with backslash continuations joined."""
    settings: list[tuple[str, str, str]] = []
    section = ""
    pending = ""
    for raw in unit_text.split("\n"):
        line = raw.strip() if not pending else raw
        if not pending and (not line or line[0] in "#;"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = (pending + line).strip()
        pending = ""
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            continue
        key, _, value = line.partition("=")
        settings.append((section, key.strip(), value.strip()))
    return settings


def exec_start_argv(unit_text: str, env: Mapping[str, str] | None = None) -> list[str]:
    values = [v for s, k, v in unit_settings(unit_text) if s == "Service" and k == "ExecStart"]
    if len(values) != 1:
        raise ValueError(f"expected one ExecStart=, found {len(values)}")
    return parse_exec_start(values[0], env)


def environment_from_unit(unit_text: str) -> dict[str, str]:
    """The Environment= assignments of a unit as systemd reads them (later ones win)."""
    env: dict[str, str] = {}
    for section, key, value in unit_settings(unit_text):
        if section == "Service" and key == "Environment":
            for item in split_exec_words(resolve_specifiers(value)):
                name, _, val = item.partition("=")
                env[name] = val
    return env
