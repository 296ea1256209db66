"""`k26ctl smoke`'s terminal report: one row per request, then the suite-wide findings and the verdict."""

from __future__ import annotations

from typing import Any

from k26ctl.smoke.report import SmokeReport
from k26ctl.termsafe import clean


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def render_table(report: SmokeReport) -> Any:
    """A Rich renderable: one row per request, then suite-wide findings."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    title = Text(f"k26ctl smoke: {clean(report.suite, limit=80)} on {clean(report.model, limit=120)}")
    table = Table(title=title, title_justify="left")
    for column, justify in (
        ("prompt", "left"),
        ("verdict", "left"),
        ("findings", "left"),
        ("tokens", "right"),
        ("tok/s", "right"),
        ("accept len", "right"),
    ):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    styles = {"ok": "green", "warn": "yellow", "FAIL": "bold red", "error": "bold red"}
    for r in report.results:
        findings = r.error or "; ".join(f.reason() for f in r.findings) or ""
        table.add_row(
            Text(clean(r.name, limit=80)),
            Text(r.verdict, style=styles[r.verdict]),
            Text(clean(findings, limit=160)),
            _fmt(r.completion_tokens, "d") if r.completion_tokens is not None else "-",
            _fmt(r.tokens_per_s, ".1f"),
            _fmt(r.accept_length, ".2f"),
        )
    lines: list[Any] = [table]
    for f in report.suite_findings:
        style = "bold red" if f.severity == "fail" else "yellow"
        lines.append(Text(clean(f"{f.severity}: {f.reason()}", limit=2000), style=style))
    if report.baseline is not None:
        b = report.baseline
        diverged = [
            f"{p.prompt_id}@{p.first_divergence}" if not p.missing else f"{p.prompt_id}(missing)"
            for p in b.prompts
            if not p.match
        ]
        text = f"baseline parity: {b.exact_match_rate:.0%} exact (need {b.min_exact_match:.0%})"
        if b.self_consistent:
            text += f"; differing but self-consistent: {', '.join(b.self_consistent)}"
        if diverged:
            text += f"; first divergence: {', '.join(diverged)}"
        lines.append(Text(clean(text, limit=2000), style="green" if b.passed else "bold red"))
    if report.probes is not None:
        p = report.probes
        style = {"pass": "green", "weak-pass": "yellow", "skipped": "yellow"}.get(p.verdict, "bold red")
        lines.append(Text(clean(p.summary(), limit=2000), style=style))
    if report.rescoring is not None:
        rescored = report.rescoring
        colour = {"pass": "green", "weak-pass": "yellow", "skipped": "yellow"}.get(
            rescored.verdict, "bold red"
        )
        lines.append(Text(clean(rescored.summary(), limit=2000), style=colour))
    if report.server_accept_after is not None:
        lines.append(
            Text(
                f"context: /server_info avg_spec_accept_length {report.server_accept_after:.2f} is a "
                "lifetime average (since start or the last flush, rolled up every decode-log interval), "
                "not this run's"
            )
        )
    lines.append(Text(report.summary(), style="bold green" if report.passed else "bold red"))
    return Group(*lines)
