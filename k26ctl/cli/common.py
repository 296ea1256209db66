"""Options and output helpers shared by the command modules (no heavy imports here)."""

from __future__ import annotations

import os
import sys
from typing import Any

import typer

from k26ctl.errors import K26Error

SET_HELP = "Override a profile key, e.g. --set spec.ddtree.budget=7 (repeatable; YAML flow values)."


def set_option() -> Any:
    return typer.Option([], "--set", "-s", metavar="KEY=VALUE", help=SET_HELP)


def profile_argument(help: str = "Profile file or shipped profile name.") -> Any:
    return typer.Argument(..., metavar="PROFILE", help=help)


def accept_new_host_key_option() -> Any:
    return typer.Option(
        False, "--accept-new-host-key", help="Trust and record an unknown host key (never a changed one)."
    )


def json_option() -> Any:
    return typer.Option(False, "--json", help="Print one JSON document on stdout.")


def yes_option() -> Any:
    return typer.Option(
        False, "--yes", "-y", envvar="K26CTL_YES", help="Do not ask for confirmation (env K26CTL_YES)."
    )


def use_color() -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return sys.stderr.isatty()


def print_error(exc: K26Error) -> None:
    from k26ctl.termsafe import clean

    prefix = "\x1b[31merror:\x1b[0m" if use_color() else "error:"
    print(f"{prefix} {clean(exc.message, limit=2000)}", file=sys.stderr)
    if exc.hint:
        print(f"  hint: {clean(exc.hint, limit=2000)}", file=sys.stderr)


def print_json(document: Any) -> None:
    from k26ctl.termsafe import json_text

    sys.stdout.write(json_text(document, indent=2) + "\n")
    sys.stdout.flush()


def _console(**kwargs: Any) -> Any:
    """A Rich console (imported lazily: Rich costs start-up time) whose broken pipe ends the
    program like any other write to a closed pipe, not with Rich's exit 1 ("check failed")."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True
            raise BrokenPipeError(32, "Broken pipe")

    return _Console(**kwargs)


def stderr_console() -> Any:
    return _console(stderr=True, no_color=not use_color() or None, highlight=False)


def stdout_console() -> Any:
    return _console(highlight=False)
