"""An unexpected exception is a crash of k26ctl, never a verdict on the server.

Exit codes 0/1 are verdicts (passed / a check failed); a crash gets its own, 70 (EX_SOFTWARE in
sysexits), and one line on stderr that says what broke, where, and where the full traceback was
written (a file under the state directory, else the temporary directory). A missing Python module
names the package to install and the command.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import sys
import tempfile
import traceback
from pathlib import Path

from k26ctl.errors import ExitCode

# import name -> distribution name, where they differ (the rest install under their import name)
_PACKAGES = {
    "yaml": "PyYAML",
    "ruamel": "ruamel.yaml",
    "google": "protobuf",
    "pydantic_core": "pydantic",
    "typing_extensions": "typing-extensions",
    "sklearn": "scikit-learn",
    "PIL": "pillow",
    "importlinter": "import-linter",
}


def _where(exc: BaseException) -> str:
    """file:line of the innermost frame (k26ctl's own last frame, when there is one)."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return "unknown location"
    own = [f for f in frames if f"{os.sep}k26ctl{os.sep}" in f.filename]
    frame = (own or frames)[-1]
    shown = frame.filename
    marker = f"{os.sep}k26ctl{os.sep}"
    if marker in shown:
        shown = "k26ctl" + os.sep + shown.rsplit(marker, 1)[1]
    return f"{shown}:{frame.lineno} in {frame.name}"


def _crash_dir() -> Path:
    try:
        from k26ctl.statedir import ensure_dir, state_root

        return ensure_dir(state_root() / "k26ctl" / "crashes")
    except Exception:  # no usable state directory: the temporary directory still works
        return Path(tempfile.gettempdir())


def write_traceback(exc: BaseException) -> Path | None:
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    text = f"k26ctl crash at {stamp}\nargv: {sys.argv!r}\n\n" + "".join(
        traceback.format_exception(type(exc), exc, exc.__traceback__)
    )
    try:
        path = _crash_dir() / f"crash-{stamp}-{os.getpid()}.txt"
        path.write_text(text)
        return path
    except OSError:
        return None


def describe(exc: BaseException) -> str:
    """The one line: what broke and where (and for a missing module, how to install it)."""
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        top = exc.name.split(".")[0]
        package = _PACKAGES.get(top, top)
        return (
            f"internal error: the Python module {exc.name!r} is missing (needed at {_where(exc)}); "
            f"install the package {package}: python3 -m pip install {package}"
        )
    message = str(exc).splitlines()[0][:300] if str(exc) else ""
    return f"internal error: {type(exc).__name__}{': ' + message if message else ''} at {_where(exc)}"


def report_crash(exc: BaseException) -> int:
    """Print the one line and the traceback's file to stderr; returns the exit code (70)."""
    from k26ctl.termsafe import clean

    path = write_traceback(exc)
    where = f"traceback in {path}" if path is not None else "the traceback could not be written"
    line = clean(f"{describe(exc)} ({where}); this is a k26ctl bug, not a verdict", limit=1200)
    with contextlib.suppress(OSError, ValueError):
        print(f"error: {line}", file=sys.stderr)
    return ExitCode.SOFTWARE
