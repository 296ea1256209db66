"""`k26ctl doctor PROFILE` and `k26ctl doctor --explain BUNDLE`: the host against the inventory."""

from __future__ import annotations

from pathlib import Path

import typer

from k26ctl.cli.common import accept_new_host_key_option, json_option, profile_argument, set_option


def doctor_command(
    profile: str | None = profile_argument(required=False),
    overrides: list[str] = set_option(),
    bundle: Path | None = typer.Option(
        None, "--bundle", metavar="FILE", help="Also write the collected facts (secrets removed) to FILE."
    ),
    explain: Path | None = typer.Option(
        None, "--explain", metavar="FILE", help="Judge a bundle offline instead of a host."
    ),
    as_json: bool = json_option(),
    accept_new_host_key: bool = accept_new_host_key_option(),
) -> None:
    """One read-only pass over PROFILE's host: GPU, SGLang and its tree, patch anchors, the unit, one
    load's journal and the HTTP surface, each checked against the conformance inventory."""
    from k26ctl.doctor.service import explain_bundle, run_doctor
    from k26ctl.errors import UsageError

    if (profile is None) == (explain is None):
        raise UsageError("give PROFILE or --explain FILE (one of them)", "k26ctl doctor profiles/base.yaml")
    if explain is not None:
        if bundle is not None:
            raise UsageError("--bundle writes what a host gave; --explain reads a bundle: not both")
        report = explain_bundle(explain)
    else:
        assert profile is not None
        report = run_doctor(profile, overrides, bundle=bundle, accept_new_host_key=accept_new_host_key)
    if as_json:
        from k26ctl.cli.common import print_json

        print_json(report.to_json())
    else:
        from k26ctl.cli.present.doctor import doctor_text

        print(doctor_text(report))
    raise typer.Exit(report.exit_code)


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor_command)
