"""Where k26ctl keeps local state (bisect and sweep sessions), with clear errors for odd homes.

`$XDG_STATE_HOME` when it is an absolute path (the XDG spec says to ignore a relative one), else
`~/.local/state`. No home directory, a state path that is a file, or a directory that cannot be
created or written is one ConfigError (exit 78) naming the path and the variable to set.
"""

from __future__ import annotations

import os
from pathlib import Path

from k26ctl.errors import ConfigError
from k26ctl.termsafe import clean

_HINT = "set XDG_STATE_HOME to a writable directory"


def state_root() -> Path:
    configured = os.environ.get("XDG_STATE_HOME", "")
    if configured and os.path.isabs(configured):
        return Path(configured)
    home = os.environ.get("HOME", "")
    if not home:
        try:
            home = str(Path.home())
        except (RuntimeError, KeyError, OSError):
            home = ""
    if not home or not os.path.isabs(home):
        raise ConfigError("no home directory to keep k26ctl's state in", _HINT)
    return Path(home) / ".local" / "state"


def ensure_dir(path: Path) -> Path:
    """Create `path` (and parents) if needed; refuse clearly when that is impossible."""
    shown = clean(str(path), limit=300)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise ConfigError(f"state directory {shown} exists but is not a directory", _HINT) from None
    except OSError as exc:
        raise ConfigError(f"cannot create state directory {shown}: {exc.strerror or exc}", _HINT) from None
    if not path.is_dir():
        raise ConfigError(f"state directory {shown} is not a directory", _HINT)
    if not os.access(path, os.W_OK | os.X_OK):
        raise ConfigError(f"state directory {shown} is not writable", _HINT)
    return path
