"""Asking before a command changes a host: --yes skips the question, no terminal refuses, "no" cancels.

Deploy, bisect-config and sweep ask the same way and differ only in their words; the question itself is
put by whoever can reach the operator (the CLI passes a prompt, or None when there is no terminal)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from k26ctl.errors import K26Error, UsageError

YES_HINT = "pass --yes (or set K26CTL_YES=1)"

Question = TypeVar("Question")


def confirm_change(
    confirm: Callable[[Question], bool] | None,
    question: Question,
    *,
    yes: bool,
    command: str,
    no_terminal: str,
    hint: str = YES_HINT,
) -> None:
    """Return when the change may go ahead; otherwise raise before anything was changed.

    `no_terminal` says what would happen without a terminal to confirm it (exit 2 with `hint`); a "no"
    on the terminal is `<command> cancelled` (exit 1)."""
    if yes:
        return
    if confirm is None:
        raise UsageError(f"{no_terminal}: nothing was changed", hint)
    if not confirm(question):
        raise K26Error(f"{command} cancelled: nothing was changed")
