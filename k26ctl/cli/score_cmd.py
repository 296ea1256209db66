"""`k26ctl score FILE`: run the degenerate-output detectors over saved outputs (JSON Lines)."""

from __future__ import annotations

import sys

import typer

from k26ctl.cli.common import json_option


def score(
    file: str = typer.Argument(
        ...,
        metavar="FILE",
        help="JSON Lines with 'text' (and optional 'prompt', 'kind'); '-' reads stdin.",
    ),
    as_json: bool = json_option(),
) -> None:
    """Score saved model outputs offline; exit 1 if any is degenerate."""
    from k26ctl.documents import tagged
    from k26ctl.smoke.offline import iter_score_file
    from k26ctl.termsafe import clean, json_text

    total = bad = 0
    for item in iter_score_file(file):  # printed as scored: a large file shows progress at once
        total += 1
        bad += item.verdict.degenerate
        if as_json:
            sys.stdout.write(json_text(tagged("score", item.to_json())) + "\n")
        else:
            verdict = "DEGENERATE" if item.verdict.degenerate else "ok"
            reasons = clean("; ".join(item.verdict.reasons), limit=2000)
            sys.stdout.write(f"{item.line}\t{verdict}\t{clean(item.verdict.kind)}\t{reasons}\n")
        sys.stdout.flush()
    if not as_json:
        print(f"{bad} of {total} degenerate", file=sys.stderr)
    raise typer.Exit(1 if bad else 0)


def register(app: typer.Typer) -> None:
    app.command("score")(score)
