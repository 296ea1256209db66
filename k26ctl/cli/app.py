"""The `k26ctl` entry point. Command modules are small and import their libraries lazily, so that
`k26ctl --help` stays fast."""

from __future__ import annotations

import importlib
import sys

import typer

from k26ctl import __version__
from k26ctl.errors import ExitCode, K26Error

# Each module exposes `register(app)`; keep this list in help order.
COMMAND_MODULES = (
    "deploy_cmd",
    "smoke_cmd",
    "bisect_cmd",
    "sweep_cmd",
    "render_cmd",
    "validate_cmd",
    "status_cmd",
    "patch_cmd",
    "score_cmd",
    "lab_cmd",
)

app = typer.Typer(
    name="k26ctl",
    help="Deploy and diagnose SGLang speculative-decoding servers (DFlash, DDTree) on a systemd GPU host.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        print(f"k26ctl {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Deploy and diagnose SGLang speculative-decoding servers on a systemd GPU host."""


for _name in COMMAND_MODULES:
    importlib.import_module(f"k26ctl.cli.{_name}").register(app)


def _raised_by_interrupt(exc: BaseException) -> bool:
    """Typer turns Ctrl-C into a silent Exit(130); find the KeyboardInterrupt behind an exit."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, KeyboardInterrupt):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def main() -> None:
    try:
        app()
    except K26Error as exc:
        from k26ctl.cli.common import print_error

        print_error(exc)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        print("error: interrupted by Ctrl-C", file=sys.stderr)
        sys.exit(ExitCode.INTERRUPTED)
    except SystemExit as exc:
        if exc.code == ExitCode.INTERRUPTED and _raised_by_interrupt(exc):
            print("error: interrupted by Ctrl-C", file=sys.stderr)
        raise


if __name__ == "__main__":
    main()
