"""The checks only the host can answer: its own SGLang parser on the rendered flags, and
`systemd-analyze verify` of the unit there (including that the interpreter exists)."""

from __future__ import annotations

from collections.abc import Iterator

from k26ctl.profile import Profile
from k26ctl.remote.base import Host
from k26ctl.render import LaunchSpec, render_launch, render_unit, unit_name
from k26ctl.validate.findings import Finding
from k26ctl.validate.options import SGLANG_ENTRYPOINTS
from k26ctl.validate.sglang_parse import parse_on_host
from k26ctl.validate.systemd_verify import interpret_verify


def remote_findings(host: Host, profile: Profile) -> list[Finding]:
    """The checks only the host can answer: its own SGLang parser on the rendered flags, and
    `systemd-analyze verify` of the unit there (including that the interpreter exists)."""
    return remote_findings_and_version(host, profile)[0]


def remote_findings_and_version(host: Host, profile: Profile) -> tuple[list[Finding], str | None]:
    """remote_findings, and the SGLang version the host's parser reported (None if it did not)."""
    launch = render_launch(profile)
    seen: list[str | None] = []
    findings = list(host_parser_findings(host, profile, launch, seen))
    findings.extend(_host_verify_findings(host, profile))
    findings.extend(_jit_cache_findings(host, profile))
    return findings, (seen[0] if seen else None)


def _jit_cache_findings(host: Host, profile: Profile) -> list[Finding]:
    """What the host's unit as systemd sees it (drop-ins included) does to the JIT caches."""
    from k26ctl.render import unit_name
    from k26ctl.validate.warm_caches import host_unit_findings

    argv = ["systemctl", "show", "-p", "DynamicUser", "--value", unit_name(profile)]
    res = host.run(argv, timeout=profile.host.command_timeout)
    if not res.ok:
        return []
    restart = profile.restart
    uses_cache_directory = restart.jit_cache and not restart.jit_cache_dir
    return host_unit_findings(
        {"DynamicUser": res.stdout.strip()}, restart.jit_cache_dir, uses_cache_directory
    )


def host_parser_findings(
    host: Host, profile: Profile, launch: LaunchSpec, versions: list[str | None] | None = None
) -> Iterator[Finding]:
    """The host's own SGLang parser on the rendered flags (`versions` receives the version it reports)."""
    if profile.sglang.entrypoint not in SGLANG_ENTRYPOINTS:
        yield Finding(
            "info",
            "remote/parser-skipped",
            f"entrypoint {profile.sglang.entrypoint} is not SGLang's launcher: flags not parsed on the host",
            "",
        )
        return
    result = parse_on_host(
        host,
        profile.sglang.python,
        launch.argv,
        profile.service.environment,
        timeout=profile.host.command_timeout,
    )
    if not result.importable:
        yield Finding(
            "error",
            "remote/sglang-not-importable",
            f"{profile.sglang.python} on {host.name} cannot import sglang.srt.server_args: {result.error}",
            "check sglang.python and service.environment.PYTHONPATH",
        )
        return
    if versions is not None:
        versions.append(result.version)
    version = result.version or "unknown version"
    for flag in result.unknown_flags:
        yield Finding(
            "error",
            "remote/unknown-flag",
            f"the host's SGLang ({version}) does not accept {flag}",
            "remove it, or install a release (or the DDTree branch) that has it",
        )
    if result.unknown and not result.unknown_flags:
        yield Finding(
            "error",
            "remote/invalid-arguments",
            f"the host's SGLang ({version}) left stray arguments: {' '.join(result.unknown)}",
            "every value in sglang.extra_args must follow its --flag",
        )
    if result.error:
        yield Finding(
            "error",
            "remote/invalid-arguments",
            f"the host's SGLang ({version}) rejects the flags: {result.error}",
            "fix the profile value named in the message",
        )


def _host_verify_findings(host: Host, profile: Profile) -> Iterator[Finding]:
    name = unit_name(profile)
    probe = host.run(["systemd-analyze", "--version"])
    if not probe.ok:
        yield Finding(
            "info", "unit/systemd-verify-skipped", f"systemd-analyze does not run on {host.name}", ""
        )
        return
    made = host.run(["mktemp", "-d", "/tmp/k26ctl-verify.XXXXXX"])
    if not made.ok:
        yield Finding("info", "unit/systemd-verify-skipped", f"cannot make a temp dir on {host.name}", "")
        return
    folder = made.stdout.strip()
    try:
        # 0600: a unit may carry a literal secret from extra_args.
        host.write_file_atomic(
            f"{folder}/{name}", render_unit(profile).encode("utf-8"), mode=0o600, backup=False
        )
        result = host.run(["systemd-analyze", "verify", "--man=no", f"{folder}/{name}"], timeout=120)
    finally:
        host.run(["rm", "-rf", "--", folder])
    yield from interpret_verify(
        result.returncode, result.stderr, name, profile.sglang.python, tolerate_missing_executable=False
    )
