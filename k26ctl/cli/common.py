"""Options and output helpers shared by the command modules (no heavy imports here)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import typer
from typer.core import TyperGroup, TyperOption

from k26ctl.errors import K26Error

T = TypeVar("T")

if TYPE_CHECKING:
    from collections.abc import Callable

    # Typer carries its own copy of Click; these are the types its groups are called with
    from typer._click import Context, HelpFormatter

SET_HELP = "Override a profile key, e.g. --set spec.ddtree.budget=7 (repeatable; YAML flow values)."


def set_option() -> Any:
    return typer.Option([], "--set", "-s", metavar="KEY=VALUE", help=SET_HELP)


def profile_argument(help: str = "Profile file (or shipped profile name).", *, required: bool = True) -> Any:
    return typer.Argument(... if required else None, metavar="PROFILE", help=help)


def accept_new_host_key_option() -> Any:
    return typer.Option(
        False, "--accept-new-host-key", help="Trust and record an unknown host key (never a changed one)."
    )


def json_option(help: str = "Print one JSON document on stdout.") -> Any:
    return typer.Option(False, "--json", help=help)


def html_option() -> Any:
    return typer.Option(
        None, "--html", metavar="FILE", help="Also write the result as one HTML page (extra: report)."
    )


def check_html(path: Path | None) -> None:
    """Before any work: the page can be written and its charts drawn (else one line, nothing run)."""
    if path is None:
        return
    from k26ctl.outputs import check_writable
    from k26ctl.report import check_available

    check_writable(path, "--html")
    check_available()


def write_html(document: Any, path: Path | None) -> None:
    """The page made from the command's JSON document: the same page `k26ctl report` makes."""
    if path is None:
        return
    from k26ctl.report import write_page

    write_page(document, path)
    print(f"html report: {path}", file=sys.stderr, flush=True)


def yes_option() -> Any:
    return typer.Option(
        False, "--yes", "-y", envvar="K26CTL_YES", help="Do not ask for confirmation (env K26CTL_YES)."
    )


def verbose_option(help: str = "Show the server's journal lines.") -> Any:
    return typer.Option(False, "--verbose", "-v", help=help)


class DefaultCommandGroup(TyperGroup):
    """A command group whose first word may be left out: `bisect-config PROFILE ...` runs the group's
    `start` command, `bisect-config log` its `log` command.

    The word that names a command may come after options, as it could when the group was one command
    (`bisect-config --session s2 log`): options in front are skipped, with their values, to find it.
    A first argument that is no command name (a profile, an option, nothing) goes to `start`; a profile
    file named like a command is reached with `start NAME` or `./NAME`."""

    default_command = "start"

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        if args and args[0] in ctx.help_option_names:
            return super().parse_args(ctx, args)
        word = self._command_word(ctx, args)
        routed = (
            [self.default_command, *args] if word is None else [args[word], *args[:word], *args[word + 1 :]]
        )
        return super().parse_args(ctx, routed)

    def _command_word(self, ctx: Context, args: list[str]) -> int | None:
        """The index of the first positional argument when it names a command, else None."""
        takes_value = self._options_with_values(ctx)
        skip_next = False
        for index, arg in enumerate(args):
            if skip_next:
                skip_next = False
            elif arg == "--":
                return None
            elif arg.startswith("-") and arg != "-":
                skip_next = "=" not in arg and arg in takes_value
            else:
                return index if arg in self.commands else None
        return None

    def _options_with_values(self, ctx: Context) -> set[str]:
        names: set[str] = set()
        for command in self.commands.values():
            for param in command.get_params(ctx):
                if isinstance(param, TyperOption) and not param.is_flag and not param.count:
                    names.update(param.opts)
        return names

    def format_usage(self, ctx: Context, formatter: HelpFormatter) -> None:
        formatter.write_usage(ctx.command_path, "[COMMAND] [ARGS]...")


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


def print_json(document: Any, kind: str | None = None) -> None:
    """One JSON document on stdout, tagged with `kind` (k26ctl/documents.py); without `kind` the
    document must carry its tag already."""
    from k26ctl.documents import tag_of, tagged
    from k26ctl.termsafe import json_text

    if kind is not None:
        document = tagged(kind, document)
    elif tag_of(document) is None:
        raise ValueError("a JSON document without its kind: tag it (k26ctl/documents.py)")
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


def resumable(call: Callable[[], T], command: str, saved: str, session: str) -> T:
    """Run a resumable search; on Ctrl-C say what is kept and how to continue, then let it end."""
    from k26ctl.errors import Interrupted

    flag = "" if session == "default" else f" --session {session}"
    try:
        return call()
    except (KeyboardInterrupt, Interrupted):
        print(f"{command}: interrupted; {saved}. Continue: k26ctl {command} --resume{flag}", file=sys.stderr)
        raise


def terminal_confirm() -> Callable[[str], bool] | None:
    """Ask yes/no on the terminal; None where stdin or stderr is not one (then only --yes answers)."""
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        return None
    return lambda question: bool(typer.confirm(question, default=False, err=True))


def keep_deployment_option() -> Any:
    return typer.Option(False, "--keep-deployment", help="Forget the session, leave the host as it is.")


def show_reset(outcome: Any, as_json: bool) -> None:
    """What a search group's `reset` did (a k26ctl.search.ops.ResetResult)."""
    print_json(outcome.to_json()) if as_json else print(outcome.message)
