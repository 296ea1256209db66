"""The entry points: run every local rule on a profile, optionally followed by the host's own checks."""

from __future__ import annotations

from k26ctl.errors import ConfigError
from k26ctl.profile import Profile
from k26ctl.remote import connect
from k26ctl.render import LaunchSpec, render_launch, render_unit, unit_name
from k26ctl.validate.findings import Finding, ValidationReport, finish, merge_findings
from k26ctl.validate.on_host import remote_findings
from k26ctl.validate.options import load_option_table, parse_flags
from k26ctl.validate.rules import RULES, Context
from k26ctl.validate.systemd_verify import verify_unit_locally


def collect_findings(profile: Profile, *, systemd: bool = True) -> tuple[list[Finding], LaunchSpec | None]:
    """All findings of the local rules; the LaunchSpec is None when the profile cannot be rendered."""
    try:
        launch = render_launch(profile)
    except ConfigError as exc:
        return [Finding("error", "render/invalid", exc.message, exc.hint or "")], None
    table = load_option_table()
    parsed, findings = parse_flags(launch.argv[3:], table, [i - 3 for i in launch.env_refs])
    ctx = Context(profile=profile, launch=launch, args=parsed, table=table)
    for check in RULES:
        findings.extend(check(ctx))
    try:
        unit = render_unit(profile)
    except ConfigError as exc:
        findings.append(Finding("error", "render/invalid", exc.message, exc.hint or ""))
    else:
        if systemd:
            findings.extend(verify_unit_locally(unit, unit_name(profile), launch.argv[0]))
    return findings, launch


def validate_profile(profile: Profile, *, strict: bool = False, systemd: bool = True) -> ValidationReport:
    findings, _ = collect_findings(profile, systemd=systemd)
    return finish(findings, strict)


def ensure_valid(profile: Profile, *, strict: bool = False) -> ValidationReport:
    """Validate, raising ConfigError (exit 78) naming the first error when the profile is not valid."""
    report = validate_profile(profile, strict=strict)
    if not report.valid:
        first = report.errors[0]
        more = f" (and {len(report.errors) - 1} more)" if len(report.errors) > 1 else ""
        raise ConfigError(
            f"{first.code}: {first.message}{more}", first.hint or "run `k26ctl validate` for all"
        )
    return report


def validate_with_host(profile: Profile, *, strict: bool = False) -> ValidationReport:
    """The local checks, then the host's own; the host is not contacted while local errors remain
    (an info finding says so), since its parser would only repeat them."""
    report = validate_profile(profile, strict=strict)
    if not report.valid:
        skipped = Finding("info", "remote/skipped", "host checks skipped: fix the local errors first", "")
        return merge_findings(report, [skipped], strict=strict)
    with connect(profile) as host:
        return merge_findings(report, remote_findings(host, profile), strict=strict)
