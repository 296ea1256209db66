"""`k26ctl validate`'s text: one line per finding (level, code, message, hint), then the verdict."""

from __future__ import annotations

import typer

from k26ctl.cli.common import use_color
from k26ctl.validate import ValidationReport


def print_report(report: ValidationReport, where: str) -> None:
    colors = {"error": "31", "warning": "33", "info": "36"}
    color = use_color()
    for f in report.findings:
        level = f"{f.level:<7}"
        if color:
            level = f"\x1b[{colors[f.level]}m{level}\x1b[0m"
        typer.echo(f"{level} {f.code}: {f.message}")
        if f.hint:
            typer.echo(f"        hint: {f.hint}")
    errors = len(report.errors)
    warnings = len(report.warnings)
    verdict = "valid" if report.valid else "invalid"
    typer.echo(f"{where}: {verdict} ({errors} error(s), {warnings} warning(s))")
