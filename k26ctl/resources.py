"""Where the shipped templates, profiles and suites live, in a checkout or an installed wheel."""

from __future__ import annotations

from functools import cache
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


@cache
def _data_root(name: str) -> Path:
    checkout = _PACKAGE.parent / name
    if checkout.is_dir():
        return checkout
    return _PACKAGE / "_bundled" / name


def templates_dir() -> Path:
    return _data_root("templates")


def profiles_dir() -> Path:
    return _data_root("profiles")


def project_root() -> Path:
    """The directory that holds the `k26ctl` package (a checkout or site-packages)."""
    return _PACKAGE.parent
