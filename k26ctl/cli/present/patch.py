"""`k26ctl patch`'s text: the shipped set, states on a host, apply/revert results, a release check."""

from __future__ import annotations

from typing import Any

import typer

from k26ctl.patches import Patch, PatchResult, PatchState
from k26ctl.patches.release import CheckReport


def patch_list_json(patches: list[Patch]) -> list[dict[str, Any]]:
    return [
        {
            "name": p.name,
            "summary": p.summary,
            "target": p.target,
            "versions": list(p.versions),
            "edits": len(p.edits),
            "not_needed": p.not_needed.reason if p.not_needed else None,
            "description": p.description,
        }
        for p in patches
    ]


def print_patch_list(patches: list[Patch]) -> None:
    for p in patches:
        versions = ", ".join(p.versions) or "any"
        typer.echo(
            f"{p.name}\n  {p.summary}\n  target: {p.target}  releases: {versions}  edits: {len(p.edits)}"
        )


def print_states(states: list[PatchState]) -> None:
    if not states:
        typer.echo("the profile lists no patches (use --name)")
    for s in states:
        version = f" (SGLang {s.sglang_version})" if s.sglang_version else ""
        typer.echo(f"{s.name}: {s.state} - {s.message}\n  {s.target}{version}")


def print_results(results: list[PatchResult]) -> None:
    for r in results:
        verb = "changed" if r.changed else "ok"
        backup = f" (backup {r.backup_path})" if r.backup_path else ""
        typer.echo(f"{r.name}: {verb} - {r.message}{backup}\n  {r.target}")


def print_check(report: CheckReport, *, show_diff: bool) -> None:
    typer.echo(report.source)
    for o in report.outcomes:
        typer.echo(f"  {o.name}: {o.result} - {o.message}")
        if show_diff and o.diff:
            typer.echo(o.diff, nl=False)
