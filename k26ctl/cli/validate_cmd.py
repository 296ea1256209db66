"""`k26ctl validate PROFILE`: everything checkable before touching the host (and, with --remote, on it)."""

from __future__ import annotations

import typer

from k26ctl.cli.common import (
    accept_new_host_key_option,
    json_option,
    print_json,
    profile_argument,
    set_option,
)


def validate(
    profile: str = profile_argument(),
    overrides: list[str] = set_option(),
    json_out: bool = json_option(),
    strict: bool = typer.Option(False, "--strict", help="Treat warnings as errors."),
    remote: bool = typer.Option(
        False, "--remote", help="Also run the host's own SGLang parser and systemd-analyze on the host."
    ),
    accept_new_host_key: bool = accept_new_host_key_option(),
) -> None:
    """Validate a profile: SGLang flags, DFlash/DDTree rules, known bugs, the rendered unit.

    Exit 0 when there is no error, 78 otherwise.
    """
    from k26ctl.errors import ConfigError, ExitCode
    from k26ctl.profile import load_profile
    from k26ctl.validate import Finding, ValidationReport, validate_profile, validate_with_host

    try:
        loaded = load_profile(profile, overrides)
    except ConfigError as exc:
        if not json_out:
            raise
        report = ValidationReport(False, [Finding("error", "profile/invalid", exc.message, exc.hint or "")])
        print_json(report.to_json(), "validate")
        raise typer.Exit(exc.exit_code) from None
    if remote:
        report = validate_with_host(loaded.profile, strict=strict, accept_new_host_key=accept_new_host_key)
    else:
        report = validate_profile(loaded.profile, strict=strict)
    if json_out:
        print_json(report.to_json(), "validate")
    else:
        from k26ctl.cli.present.validate import print_report

        print_report(report, str(loaded.path))
    raise typer.Exit(ExitCode.OK if report.valid else ExitCode.CONFIG)


def register(app: typer.Typer) -> None:
    app.command("validate")(validate)
