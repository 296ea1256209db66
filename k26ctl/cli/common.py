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


def stderr_console() -> Any:
    """A Rich console on stderr (imported lazily: Rich costs start-up time)."""
    from rich.console import Console

    return Console(stderr=True, no_color=not use_color() or None, highlight=False)


def stdout_console() -> Any:
    from rich.console import Console

    return Console(highlight=False)
