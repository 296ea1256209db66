"""The entry points: run every local rule on a profile, optionally followed by the host's own checks."""

from __future__ import annotations

from k26ctl.errors import ConfigError
from k26ctl.profile import Profile
from k26ctl.remote import connect
from k26ctl.remote.base import Host
from k26ctl.render import LaunchSpec, render_launch, render_unit, unit_name
from k26ctl.validate.findings import Finding, ValidationReport, finish, merge_findings
from k26ctl.validate.on_host import host_parser_findings, remote_findings_and_version
from k26ctl.validate.options import load_option_table, parse_flags
from k26ctl.validate.rules import RULES, Context
from k26ctl.validate.systemd_verify import verify_unit_locally


def collect_findings(
    profile: Profile, *, systemd: bool = True, host_patches: dict[str, str] | None = None
) -> tuple[list[Finding], LaunchSpec | None]:
    """All findings of the local rules; the LaunchSpec is None when the profile cannot be rendered.
    `host_patches` (patch name -> state on the host) lets host-dependent rules use what the host said."""
    try:
        launch = render_launch(profile)
    except ConfigError as exc:
        return [Finding("error", "render/invalid", exc.message, exc.hint or "")], None
    table = load_option_table(profile.sglang.version)
    parsed, findings = parse_flags(launch.argv[3:], table, [i - 3 for i in launch.env_refs])
    ctx = Context(profile=profile, launch=launch, args=parsed, table=table, host_patches=host_patches)
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


def ensure_valid(profile: Profile, *, strict: bool = False, systemd: bool = True) -> ValidationReport:
    """Validate, raising ConfigError (exit 78) naming the first error when the profile is not valid.
    With systemd=False the rendered unit is left for `ensure_unit_verifies` (deploy runs it alongside
    the connection)."""
    return _raise_first_error(validate_profile(profile, strict=strict, systemd=systemd))


def ensure_unit_verifies(profile: Profile, unit_text: str) -> ValidationReport:
    """`systemd-analyze verify` of the rendered unit here, raising ConfigError on its errors."""
    findings = verify_unit_locally(unit_text, unit_name(profile), render_launch(profile).argv[0])
    return _raise_first_error(finish(findings, False))


def _raise_first_error(report: ValidationReport) -> ValidationReport:
    if not report.valid:
        first = report.errors[0]
        more = f" (and {len(report.errors) - 1} more)" if len(report.errors) > 1 else ""
        raise ConfigError(
            f"{first.code}: {first.message}{more}", first.hint or "run `k26ctl validate` for all"
        )
    return report


# Findings where the local table leaves the verdict to the host's own parser.
DEFERRED_TO_HOST = ("flags/unknown",)


def with_host_version(profile: Profile, version: str | None) -> Profile:
    """The profile with sglang.version filled from the host when the profile leaves it unset."""
    if profile.sglang.version is not None or not version:
        return profile
    return profile.model_copy(update={"sglang": profile.sglang.model_copy(update={"version": version})})


def validate_against_host(
    profile: Profile, host: Host, *, sglang_version: str | None, host_patches: dict[str, str] | None
) -> ValidationReport:
    """The local rules again, judged with what the host said (its SGLang release, its patch states);
    where the local table defers a flag, the host's own parser is asked."""
    judged = with_host_version(profile, sglang_version)
    findings, launch = collect_findings(judged, systemd=False, host_patches=host_patches)
    if launch is not None and any(f.code in DEFERRED_TO_HOST for f in findings):
        findings.extend(host_parser_findings(host, judged, launch))
    return finish(findings, strict=False)


def validate_with_host(
    profile: Profile, *, strict: bool = False, accept_new_host_key: bool = False
) -> ValidationReport:
    """The local checks, then the host's own; the host is not contacted while local errors remain
    (an info finding says so), since its parser would only repeat them. The host's parser reports
    its SGLang version: when the profile does not name one, the local rules run again with it."""
    report = validate_profile(profile, strict=strict)
    if not report.valid:
        skipped = Finding("info", "remote/skipped", "host checks skipped: fix the local errors first", "")
        return merge_findings(report, [skipped], strict=strict)
    with connect(profile, accept_new_host_key=accept_new_host_key) as host:
        remote, version = remote_findings_and_version(host, profile)
    if profile.sglang.version is None and version:
        local, _ = collect_findings(with_host_version(profile, version))
        told = Finding("info", "sglang/version-from-host", f"the host runs SGLang {version}", "")
        return finish([*local, told, *remote], strict)
    return merge_findings(report, remote, strict=strict)
