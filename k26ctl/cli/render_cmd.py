"""`k26ctl render PROFILE`: show what a deploy would install (unit, argv, environment), secrets hidden."""

from __future__ import annotations

import typer

from k26ctl.cli.common import profile_argument, set_option

FORMATS = ("unit", "argv", "env", "json")


def render(
    profile: str = profile_argument(),
    overrides: list[str] = set_option(),
    fmt: str = typer.Option("unit", "--format", "-f", help=f"One of: {', '.join(FORMATS)}."),
) -> None:
    """Render the systemd unit (or argv, environment, JSON) for a profile. Literal secrets are redacted."""
    if fmt not in FORMATS:
        raise typer.BadParameter(f"{fmt!r} is not one of {', '.join(FORMATS)}", param_hint="--format")
    from k26ctl.profile import load_profile
    from k26ctl.render import rendered_document

    loaded = load_profile(profile, overrides)
    typer.echo(rendered_document(loaded.profile, fmt), nl=False)


def register(app: typer.Typer) -> None:
    app.command("render")(render)
