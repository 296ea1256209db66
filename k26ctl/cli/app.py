"""The `k26ctl` entry point. Command modules are small and import their libraries lazily, so that
`k26ctl --help` stays fast."""

from __future__ import annotations

import errno
import importlib
import os
import signal
import sys
from typing import NoReturn

import typer

from k26ctl import __version__
from k26ctl.cli.lean_imports import keep_unused_imports_out
from k26ctl.cli.lost_interrupts import redeliver_lost_interrupts
from k26ctl.errors import ExitCode, K26Error, interrupt_behind

# Each module exposes `register(app)`; keep this list in help order.
COMMAND_MODULES = (
    "deploy_cmd",
    "smoke_cmd",
    "watch_cmd",
    "bisect_cmd",
    "sweep_cmd",
    "render_cmd",
    "validate_cmd",
    "status_cmd",
    "doctor_cmd",
    "patch_cmd",
    "score_cmd",
    "report_cmd",
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


def _main() -> None:
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
        if exc.code == ExitCode.INTERRUPTED and interrupt_behind(exc):  # Typer's silent Exit(130)
            print("error: interrupted by Ctrl-C", file=sys.stderr)
        raise
    except Exception as exc:
        if isinstance(exc, OSError) and (isinstance(exc, BrokenPipeError) or exc.errno in _OUTPUT_ERRNOS):
            raise  # standard output failed: main() reports it
        if interrupt_behind(exc):  # a Ctrl-C that Python wrapped (errors.interrupt_behind)
            print("error: interrupted by Ctrl-C", file=sys.stderr)
            sys.exit(ExitCode.INTERRUPTED)
        from k26ctl.cli.crash import report_crash

        sys.exit(report_crash(exc))


# Standard output failures: a reader that went away (`| head`) ends the program as SIGPIPE would
# (128 + 13, silently); a full disk or an I/O error is an error on stderr, exit 74.
BROKEN_PIPE_EXIT = 141
_OUTPUT_ERRNOS = (errno.ENOSPC, errno.EIO, errno.EDQUOT, errno.EFBIG, errno.EBADF)


def _silence_stdout() -> None:
    """Point fd 1 at /dev/null so the interpreter's final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
    except OSError:
        pass


def _output_failed(exc: OSError) -> NoReturn:
    if isinstance(exc, BrokenPipeError):
        _silence_stdout()
        sys.exit(BROKEN_PIPE_EXIT)
    print(f"error: cannot write standard output: {exc.strerror or exc}", file=sys.stderr)
    _silence_stdout()
    sys.exit(ExitCode.IO_ERROR)


def _click_saw_broken_pipe() -> bool:
    """Click (vendored by Typer) turns EPIPE on stdout into exit 1, our "check failed", after
    wrapping the stream in its PacifyFlushWrapper; that wrapper is the only trace left."""
    return type(sys.stdout).__name__ == "PacifyFlushWrapper"


def _flush_stdout() -> None:
    if sys.stdout is not None:
        sys.stdout.flush()


def main() -> None:
    try:
        os.fstat(1)
    except OSError:
        sys.stdout = None
    if sys.stdout is None:  # started with stdout closed (`k26ctl ... >&-`): say so, do not pretend
        print("error: standard output is closed; nothing can be printed", file=sys.stderr)
        sys.exit(ExitCode.IO_ERROR)
    try:
        try:
            _main()
        except SystemExit:
            if _click_saw_broken_pipe():
                _output_failed(BrokenPipeError(errno.EPIPE, "Broken pipe"))
            raise
        finally:
            _flush_stdout()
    except OSError as exc:
        if isinstance(exc, BrokenPipeError) or exc.errno in _OUTPUT_ERRNOS:
            _output_failed(exc)
        raise


def _exit_status(code: object) -> int:
    """What the interpreter would make of SystemExit(code): None is 0, a message is printed and 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def entry() -> NoReturn:
    """The console script and `python -m k26ctl`: main(), then exit at once with its status.

    When main() ends, the work is done, connections are closed and the outcome is printed. The
    interpreter's own teardown would add 0.1-0.25 s, and it puts SIGINT back to the default action
    early on: a second Ctrl-C landing there killed the process by the signal, not with exit 130."""
    keep_unused_imports_out()
    redeliver_lost_interrupts()
    try:
        main()
        status = 0
    except SystemExit as exc:
        status = _exit_status(exc.code)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the outcome is decided: a late Ctrl-C cannot change it
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass  # main() has already reported an output failure; nothing more can be said
    os._exit(status)


if __name__ == "__main__":
    entry()
