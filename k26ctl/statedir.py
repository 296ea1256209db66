"""Where k26ctl keeps local state (bisect, sweep and fleet sessions, lab hosts) and caches, with clear
errors for odd homes.

The XDG fallback chain, first usable entry wins:

1. `$XDG_STATE_HOME` (`$XDG_CACHE_HOME` for caches) when it is an absolute path (the XDG spec says
   to ignore a relative one);
2. `$STATE_DIRECTORY` (`$CACHE_DIRECTORY`), which systemd sets for a unit with `StateDirectory=`
   (the only writable place a `DynamicUser=` unit has); the first of a colon-separated list;
3. `$HOME/.local/state` (`$HOME/.cache`);
4. the passwd entry's home directory, when `HOME` is unset (cron, containers).

No usable entry (no HOME and no passwd entry for the user, as in a container run with an arbitrary
uid), a state path that is a file, or a directory that cannot be created or written is one
ConfigError (exit 78) naming the path and the variable to set. Nothing here raises anything else.
"""

from __future__ import annotations

import os
from pathlib import Path

from k26ctl.errors import ConfigError
from k26ctl.termsafe import clean

_HINT = "set XDG_STATE_HOME to a writable directory"
_CACHE_HINT = "set XDG_CACHE_HOME to a writable directory"


def _absolute(value: str | None) -> str:
    return value if value and os.path.isabs(value) else ""


def _systemd_directory(variable: str) -> str:
    return _absolute(os.environ.get(variable, "").split(":")[0])


def home_directory() -> str:
    """$HOME, else the passwd entry's home; "" when neither gives an absolute path."""
    home = _absolute(os.environ.get("HOME"))
    if home:
        return home
    try:
        import pwd

        return _absolute(pwd.getpwuid(os.getuid()).pw_dir)
    except (KeyError, ImportError, OSError):  # KeyError: no passwd entry for this uid
        return ""


def _root(xdg: str, systemd: str, under_home: tuple[str, ...], kind: str, hint: str) -> Path:
    configured = _absolute(os.environ.get(xdg))
    if configured:
        return Path(configured)
    unit_dir = _systemd_directory(systemd)
    if unit_dir:
        return Path(unit_dir)
    home = home_directory()
    if home:
        return Path(home).joinpath(*under_home)
    raise ConfigError(
        f"no directory to keep k26ctl's {kind} in: {xdg} and {systemd} are unset and there is no home "
        f"directory (HOME unset, no passwd entry for uid {os.getuid()})",
        hint,
    )


def state_root() -> Path:
    """The base directory for local state (k26ctl adds `k26ctl/<area>/`)."""
    return _root("XDG_STATE_HOME", "STATE_DIRECTORY", (".local", "state"), "state", _HINT)


def cache_root() -> Path:
    """The base directory for caches (k26ctl adds `k26ctl/<what>/`)."""
    return _root("XDG_CACHE_HOME", "CACHE_DIRECTORY", (".cache",), "cache", _CACHE_HINT)


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
