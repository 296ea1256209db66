"""Bounded reading of every input file k26ctl is given (profiles, `extends:` parents, suites,
baselines, JSON Lines for `score`, bisect logs).

Only regular files are read: a directory, FIFO (which would block forever), device (`/dev/zero`
never ends) or socket is refused before it is opened, and the file is opened non-blocking and
checked again after opening, so swapping one in between changes nothing. A file larger than the
caller's limit is refused without reading it whole; text must be UTF-8. Every refusal is one
`ConfigError` (exit 78) naming the file and the reason.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from k26ctl.errors import ConfigError

MAX_PROFILE_BYTES = 1 << 20  # a real profile is a few KB
MAX_DATA_BYTES = 64 << 20  # suites, baselines: generous
MAX_LINE_BYTES = 16 << 20  # one JSON Lines record (a saved answer)

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _kind(mode: int) -> str:
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def _describe(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "symbolic link loop"
    if exc.errno == errno.ENAMETOOLONG:
        return "file name too long"
    return exc.strerror or type(exc).__name__


def _refuse(what: str, path: str | Path, reason: str, hint: str | None) -> ConfigError:
    from k26ctl.termsafe import clean

    return ConfigError(f"{what} {clean(str(path), limit=300)}: {reason}", hint)


def open_regular(path: str | Path, *, what: str, max_bytes: int, hint: str | None = None) -> BinaryIO:
    """Open `path` for reading in binary after the checks above; the caller closes it."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        from k26ctl.termsafe import clean

        raise ConfigError(
            f"{what} not found: {clean(str(path), limit=300)}", hint or "check the path"
        ) from None
    except OSError as exc:
        raise _refuse(what, path, _describe(exc), hint) from None
    if not stat.S_ISREG(info.st_mode):
        raise _refuse(what, path, f"is {_kind(info.st_mode)}; only regular files are read", hint)
    if info.st_size > max_bytes:
        raise _refuse(what, path, f"{info.st_size} bytes, larger than the {max_bytes}-byte limit", hint)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise _refuse(what, path, _describe(exc), hint) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped after the first look
            raise _refuse(what, path, "is not a regular file; only regular files are read", hint)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path: str | Path, *, what: str, max_bytes: int, hint: str | None = None) -> bytes:
    with open_regular(path, what=what, max_bytes=max_bytes, hint=hint) as handle:
        try:
            data = handle.read(max_bytes + 1)
        except OSError as exc:
            raise _refuse(what, path, _describe(exc), hint) from None
    if len(data) > max_bytes:  # it grew while we read
        raise _refuse(what, path, f"larger than the {max_bytes}-byte limit", hint)
    return data


def decode(data: bytes, what: str, path: str | Path, hint: str | None = None) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _refuse(what, path, f"not UTF-8 text (byte {exc.start})", hint) from None


def read_text(path: str | Path, *, what: str, max_bytes: int, hint: str | None = None) -> str:
    """The whole file as UTF-8 text, within the limits above."""
    return decode(read_bytes(path, what=what, max_bytes=max_bytes, hint=hint), what, path, hint)


def iter_lines(
    stream: BinaryIO, *, what: str, where: str, max_line: int = MAX_LINE_BYTES
) -> Iterator[tuple[int, str]]:
    """(number, text) per line, split on "\\n" only (JSON Lines: a raw U+2028 inside a string is
    part of the line), each at most `max_line` bytes and UTF-8; read incrementally."""
    number = 0
    while True:
        try:
            raw = stream.readline(max_line + 1)
        except OSError as exc:
            raise _refuse(what, where, _describe(exc), None) from None
        if not raw:
            return
        number += 1
        if len(raw) > max_line:
            raise ConfigError(f"{where}:{number}: line longer than {max_line} bytes", "one record per line")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{where}:{number}: not UTF-8 text (byte {exc.start})") from None
        yield number, text.rstrip("\r\n") if text.endswith("\n") else text


# ---- the environment -------------------------------------------------------------------------------


def env_text(name: str) -> str:
    """An environment variable as text ("" when unset). Bytes that are not UTF-8, which Python keeps
    as lone surrogates, are replaced by U+FFFD so the value can be printed, written and sent."""
    from k26ctl.jsonsafe import encodable

    return encodable(os.environ.get(name, ""))[0]


def api_key(variable: str | None) -> str | None:
    """The server's API key from the variable `sglang.api_key_env` / `--api-key-env` names (None where
    none is named). A named but unset or empty variable is a ConfigError: the server was started with
    --api-key, so every call k26ctl makes without the key would be refused."""
    if not variable:
        return None
    value = env_secret(variable, what="the API key", hint=f"export {variable}=... with the server's key")
    if not value:
        raise ConfigError(
            f"the API key variable {variable} is not set",
            f"export {variable}=... with the server's key, or drop sglang.api_key_env / --api-key-env",
        )
    return value


def env_secret(name: str, *, what: str, hint: str) -> str | None:
    """A key for an HTTP header from variable `name`; None when unset or empty. A value an HTTP header
    cannot carry (controls, non-ASCII, undecodable bytes) is a ConfigError naming the variable."""
    value = os.environ.get(name, "")
    if not value:
        return None
    if not all(" " <= ch <= "~" for ch in value):
        raise ConfigError(
            f"{what} variable {name} holds characters an HTTP header cannot carry (only printable ASCII)",
            hint,
        )
    return value
