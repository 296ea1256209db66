"""Report files (`--junit`, `--record-baseline`, ...): checked before the run, written atomically.

`check_writable` runs before any work starts, so a path whose directory is missing, that names a
directory, or that cannot be written is refused up front (exit 2) instead of after a 20-minute run.
`write_atomic` writes a temporary file next to the target, fsyncs it and renames it over the
target; on any failure the temporary file is removed and the target is left as it was.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from k26ctl.errors import OutputError, UsageError
from k26ctl.termsafe import clean


def check_writable(path: str | Path, option: str) -> Path:
    target = Path(path)
    shown = clean(str(target), limit=300)
    parent = target.parent if str(target.parent) else Path(".")
    if target.is_dir():
        raise UsageError(f"{option} {shown}: is a directory", "give a file name")
    if target.exists() and not target.is_file():
        raise UsageError(f"{option} {shown}: exists and is not a regular file", "give a file name")
    if not parent.is_dir():
        raise UsageError(
            f"{option} {shown}: directory {clean(str(parent), limit=300)} does not exist",
            "create it first, or give another path",
        )
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {shown}: directory not writable", "give a path you can write")
    if target.exists() and not os.access(target, os.W_OK):
        raise UsageError(f"{option} {shown}: file not writable", "give a path you can write")
    return target


def write_atomic(path: str | Path, text: str) -> None:
    target = Path(path)
    parent = target.parent if str(target.parent) else Path(".")
    tmp_name: str | None = None
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=parent)
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, target)
        tmp_name = None
    except OSError as exc:
        raise OutputError(
            f"cannot write {clean(str(target), limit=300)}: {exc.strerror or exc}",
            "check the disk space and permissions of that directory",
        ) from None
    finally:
        if tmp_name is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp_name)
