"""Run the host's own SGLang argument parser on a rendered argv, without launching anything.

The committed option table describes one release; the host may run another (or the DDTree branch).
Only the host's `ServerArgs.add_cli_args` knows for sure which flags and choices its SGLang accepts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from k26ctl.remote.base import Host

# Runs on the host with the service's Python. Reads the flags from argv, prints one JSON line.
_PARSE_SCRIPT = r"""
import argparse, json, sys
flags = sys.argv[1:]
out = {"importable": False, "version": None, "unknown": [], "error": None}
try:
    from sglang.srt.server_args import ServerArgs
except BaseException as exc:
    out["error"] = f"{type(exc).__name__}: {exc}"
    print(json.dumps(out)); sys.exit(0)
out["importable"] = True
try:
    import sglang
    out["version"] = getattr(sglang, "__version__", None)
except BaseException:
    pass

class _Refuse(Exception):
    pass

class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise _Refuse(message)

parser = _Parser(prog="sglang")
try:
    ServerArgs.add_cli_args(parser)
    _, out["unknown"] = parser.parse_known_args(flags)
except _Refuse as exc:
    out["error"] = str(exc)
except SystemExit as exc:
    out["error"] = f"parser exited ({exc.code})"
print(json.dumps(out))
"""


@dataclass
class HostParseResult:
    """What the host's SGLang parser said about the flags."""

    importable: bool
    version: str | None = None
    unknown: list[str] = field(default_factory=list)
    error: str | None = None  # argparse's message (invalid choice, missing value) or the import error
    python: str = ""

    @property
    def ok(self) -> bool:
        return self.importable and not self.unknown and self.error is None

    @property
    def unknown_flags(self) -> list[str]:
        """The flags the host's parser does not know (only the `--name` words, not their values)."""
        return [word for word in self.unknown if word.startswith("-")]

    @property
    def message(self) -> str:
        """One line saying what the host's SGLang made of the flags."""
        where = f"{self.python}: " if self.python else ""
        if not self.importable:
            return f"{where}SGLang is not importable ({self.error})"
        version = f"SGLang {self.version}" if self.version else "SGLang"
        if self.unknown_flags:
            return f"{where}{version} does not accept {', '.join(self.unknown_flags)}"
        if self.unknown:
            return f"{where}{version} left stray arguments: {' '.join(self.unknown)}"
        if self.error:
            return f"{where}{version} rejects the flags: {self.error}"
        return f"{where}{version} accepts the flags"

    def to_json(self) -> dict[str, Any]:
        return {
            "importable": self.importable,
            "version": self.version,
            "unknown": self.unknown,
            "error": self.error,
            "python": self.python,
        }


def sglang_flags(argv: Sequence[str]) -> list[str]:
    """The flags of a launch argv: drop `python -m module` (or `python -m sglang serve`)."""
    words = list(argv)
    if len(words) >= 3 and words[1] == "-m":
        words = words[3:]
        if words[:1] == ["serve"]:
            words = words[1:]
    return words


def parse_on_host(
    host: Host,
    python: str,
    argv: Sequence[str],
    env: Mapping[str, str] | None = None,
    *,
    timeout: float | None = None,
) -> HostParseResult:
    """Build SGLang's parser with `python` on `host` and parse the flags of `argv` (parse only).

    `env` is the service environment (PYTHONPATH and friends decide which sglang is imported).
    Raises RemoteCommandError-free: a Python that cannot run at all is reported in `.error`.
    """
    result = host.run(
        [python, "-c", _PARSE_SCRIPT, *sglang_flags(argv)],
        env=dict(env) if env else None,
        timeout=timeout,
    )
    lines = result.stdout.strip().splitlines()
    try:
        data = json.loads(lines[-1]) if lines else None
    except ValueError:
        data = None
    if not isinstance(data, dict):
        detail = (result.stderr.strip().splitlines() or [f"exit {result.returncode}"])[-1]
        if result.returncode == 127:  # `env` could not find the interpreter
            detail = f"no such interpreter on {host.name}"
        return HostParseResult(importable=False, error=f"{python} could not run: {detail}", python=python)
    return HostParseResult(
        importable=bool(data.get("importable")),
        version=data.get("version"),
        unknown=[str(u) for u in data.get("unknown") or []],
        error=data.get("error"),
        python=python,
    )


RemoteParse = HostParseResult
"""The name the remote layer's callers use: `.ok`, `.importable`, `.message`, `.unknown_flags`."""
