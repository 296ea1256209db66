"""Placeholder: its command is not built yet."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Nothing to register yet."""
