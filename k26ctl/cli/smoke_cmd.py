"""`k26ctl smoke`: prove a running server answers sensibly (exit 0 pass, 1 a check failed, 69 unreachable)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from k26ctl.cli.common import (
    accept_new_host_key_option,
    html_option,
    json_option,
    profile_argument,
    set_option,
)

if TYPE_CHECKING:
    from k26ctl.remote.base import Host
    from k26ctl.smoke.report import RequestResult, SmokeReport


def smoke(
    profile: str | None = profile_argument("Profile naming the server.", required=False),
    overrides: list[str] = set_option(),
    url: str | None = typer.Option(None, "--url", help="Server base URL instead of a profile."),
    accept_new_host_key: bool = accept_new_host_key_option(),
    model: str | None = typer.Option(None, "--model", help="Model name (default: from /v1/models)."),
    suite: str | None = typer.Option(
        None, "--suite", help="Suite file, or a shipped suite name (default, lab). Default: profile's."
    ),
    as_json: bool = json_option(),
    junit: Path | None = typer.Option(None, "--junit", metavar="FILE", help="Also write JUnit XML."),
    html: Path | None = html_option(),
    concurrency: int | None = typer.Option(None, "--concurrency", min=1, help="Requests in flight (>= 2)."),
    baseline: Path | None = typer.Option(None, "--baseline", metavar="FILE", help="Compare greedy outputs."),
    record_baseline: Path | None = typer.Option(
        None, "--record-baseline", metavar="FILE", help="Store greedy outputs and the server identity."
    ),
    min_exact_match: float = typer.Option(
        1.0, "--min-exact-match", min=0.0, max=1.0, help="Baseline pass rule (1.0 all; 0.66 lenient)."
    ),
    min_accept_length: float | None = typer.Option(
        None,
        "--min-accept-length",
        help="Accept-length floor (default: profile smoke.min_accept_length).",
    ),
    timeout: float | None = typer.Option(None, "--timeout", help="Seconds per request (default 120)."),
    api_key_env: str | None = typer.Option(
        None, "--api-key-env", metavar="VAR", help="Environment variable holding the API key."
    ),
    no_expect: bool = typer.Option(False, "--no-expect", help="Skip the prompts' expect checks."),
    no_probes: bool = typer.Option(
        False, "--no-probes", help="Skip the greedy self-consistency probes after the suite."
    ),
    probe_positions: int | None = typer.Option(
        None, "--probe-positions", min=1, help="Output tokens probed per answer (default 32)."
    ),
    rescoring: bool | None = typer.Option(
        None,
        "--rescoring/--no-rescoring",
        help="Rescore sampled answers by prefill (default: with the probes; DDTree only when asked).",
    ),
    lossless_strict: bool = typer.Option(
        False,
        "--lossless-strict",
        help="Fail when the server runs lossy-by-design settings (profile: smoke.lossless: strict).",
    ),
) -> None:
    """Run the coherence suite against a live SGLang server."""
    from k26ctl.errors import UnreachableError, UsageError

    if (profile is None) == (url is None):
        raise UsageError(
            "give either a PROFILE or --url URL", "e.g. k26ctl smoke ddtree-b7, or --url http://..."
        )
    if url is not None and overrides:
        raise UsageError("--set applies to a profile, not to --url")
    _check_options(url, timeout, junit, record_baseline, html)
    try:
        report = _run(
            profile,
            overrides,
            url,
            model,
            suite,
            concurrency,
            baseline,
            record_baseline,
            min_exact_match,
            min_accept_length,
            timeout,
            api_key_env,
            no_expect,
            no_probes,
            probe_positions,
            quiet=as_json,
            accept_new_host_key=accept_new_host_key,
            lossless_strict=lossless_strict,
            rescoring=rescoring,
        )
    except UnreachableError as exc:
        if junit is not None:  # CI still gets a report saying why nothing ran
            from k26ctl.outputs import write_atomic
            from k26ctl.smoke.report import unreachable_junit

            write_atomic(junit, unreachable_junit(suite or "default", exc.one_line()))
        raise
    _present(report, as_json, junit, html)
    below = (report.accept_baseline or {}).get("status") == "failed"
    raise typer.Exit(0 if report.passed and not below else 1)


def _check_options(
    url: str | None,
    timeout: float | None,
    junit: Path | None,
    record_baseline: Path | None,
    html: Path | None = None,
) -> None:
    """Refuse what cannot work before anything runs: a 20-minute suite must not end in a lost report."""
    from k26ctl.errors import UsageError
    from k26ctl.httpsafe import MAX_TIMEOUT, check_timeout
    from k26ctl.outputs import check_writable

    if timeout is not None:
        try:
            check_timeout(timeout)
        except ValueError:
            raise UsageError(
                f"--timeout {timeout!r}: expected seconds in (0, {MAX_TIMEOUT:g}]", "e.g. --timeout 120"
            ) from None
    if url is not None:
        check_base_url(url)
    if junit is not None:
        check_writable(junit, "--junit")
    if record_baseline is not None:
        check_writable(record_baseline, "--record-baseline")
    from k26ctl.cli.common import check_html

    check_html(html)


def check_base_url(url: str) -> None:
    from k26ctl.errors import UsageError
    from k26ctl.termsafe import clean

    shown = clean(url, limit=200)
    hint = "e.g. --url http://127.0.0.1:30000"
    try:
        import httpx

        parsed = httpx.URL(url)
    except Exception:  # httpx raises InvalidURL, ValueError or TypeError depending on the flaw
        raise UsageError(f"--url {shown}: not a valid URL", hint) from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise UsageError(f"--url {shown}: needs http:// or https:// and a host", hint)
    if parsed.query or parsed.fragment or "@" in url.split("/")[2 if "//" in url else 0]:
        raise UsageError(f"--url {shown}: give only scheme, host, port and path", hint)


def _run(
    profile_ref: str | None,
    overrides: list[str],
    url: str | None,
    model: str | None,
    suite_ref: str | None,
    concurrency: int | None,
    baseline: Path | None,
    record_baseline: Path | None,
    min_exact_match: float,
    min_accept_length: float | None,
    timeout: float | None,
    api_key_env: str | None,
    no_expect: bool,
    no_probes: bool,
    probe_positions: int | None,
    quiet: bool,
    accept_new_host_key: bool = False,
    lossless_strict: bool = False,
    rescoring: bool | None = None,
) -> SmokeReport:
    from k26ctl import inputs
    from k26ctl.cli.common import stderr_console
    from k26ctl.smoke import SmokeOptions, SmokeTarget, load_suite, run_smoke
    from k26ctl.smoke.target import options_from_profile, profile_target, with_overrides
    from k26ctl.termsafe import clean, for_rich

    console = stderr_console()

    def progress(result: RequestResult) -> None:
        if not quiet:  # plain and flushed: a watcher sees each answer as it arrives
            print(f"  {clean(result.name, limit=80)}: {result.verdict}", file=sys.stderr, flush=True)

    settings: dict[str, Any] = {
        "concurrency": concurrency,
        "baseline": baseline,
        "record_baseline": record_baseline,
        "min_exact_match": min_exact_match,
        "min_accept_length": min_accept_length,
        "timeout": timeout,
        "expectations": False if no_expect else None,
        "probes": False if no_probes else None,
        "probe_positions": probe_positions,
        "lossless_strict": True if lossless_strict else None,
        "rescoring": rescoring,
        "on_result": progress,
    }
    if url is not None:
        from k26ctl.smoke.accept_memory import AcceptMemory

        options = with_overrides(SmokeOptions(accept_memory=AcceptMemory()), **settings)
        suite = load_suite(suite_ref or "default")
        target = SmokeTarget(url, model, inputs.api_key(api_key_env))
        if not quiet:
            console.print(f"smoke: suite {for_rich(suite.name)} against {for_rich(url)}")
        return run_smoke(target, suite, options=options)

    from k26ctl.deploy.history import host_prior_accept
    from k26ctl.profile import load_profile

    loaded = load_profile(profile_ref or "", overrides)
    profile = loaded.profile
    options = options_from_profile(profile, **settings)
    suite = load_suite(suite_ref or profile.smoke.suite or "default")

    hosts: list[Host] = []

    def read_prior(host: Host) -> None:
        hosts.append(host)
        options.prior_accept = host_prior_accept(host, profile)

    with profile_target(
        profile,
        model=model,
        api_key_env=api_key_env,
        accept_new_host_key=accept_new_host_key,
        on_host=read_prior,
    ) as target:
        if not quiet:
            console.print(
                f"smoke: suite {for_rich(suite.name)} against {for_rich(profile.name)} "
                f"({for_rich(target.base_url)})"
            )
        report = run_smoke(target, suite, options=options)
        _judge_accept_baseline(hosts[0], profile, report)
        return report


def _judge_accept_baseline(host: Host, profile: Any, report: SmokeReport) -> None:
    """The accept length beside its configuration's baseline on the host (recorded when it passes)."""
    from k26ctl.deploy.accept_baseline import judge_on_host
    from k26ctl.errors import K26Error

    try:
        found = judge_on_host(host, profile, report, source="smoke")
    except K26Error as exc:
        report.accept_baseline = {"status": "unreadable", "message": exc.one_line()}
        return
    if found is not None:
        report.accept_baseline = found.to_json()


def _present(report: SmokeReport, as_json: bool, junit: Path | None, html: Path | None = None) -> None:
    from rich.text import Text

    from k26ctl.cli.common import print_json, stderr_console, stdout_console, write_html
    from k26ctl.cli.present.smoke import render_table

    if junit is not None:
        from k26ctl.outputs import write_atomic

        write_atomic(junit, report.to_junit())
    write_html(report.to_json(), html)
    if as_json:
        print_json(report.to_json())
        stderr_console().print(Text(report.summary()), highlight=False)
        return
    stdout_console().print(render_table(report))
    sys.stdout.flush()


def register(app: typer.Typer) -> None:
    app.command("smoke")(smoke)
