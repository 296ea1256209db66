"""`k26ctl score FILE`: run the degenerate-output detectors over saved outputs (JSON Lines)."""

from __future__ import annotations

import sys

import typer

from k26ctl.cli.common import json_option


def register(app: typer.Typer) -> None:
    @app.command("score")
    def score(
        file: str = typer.Argument(
            ...,
            metavar="FILE",
            help="JSON Lines with 'text' (and optional 'prompt', 'kind'); '-' reads stdin.",
        ),
        as_json: bool = json_option(),
    ) -> None:
        """Score saved model outputs offline; exit 1 if any is degenerate."""
        from k26ctl.smoke.offline import score_file

        scored = score_file(file)
        if as_json:
            import json

            for item in scored:
                sys.stdout.write(json.dumps(item.to_json(), ensure_ascii=False) + "\n")
        else:
            for item in scored:
                verdict = "DEGENERATE" if item.verdict.degenerate else "ok"
                reasons = "; ".join(item.verdict.reasons)
                print(f"{item.line}\t{verdict}\t{item.verdict.kind}\t{reasons}")
            bad = sum(item.verdict.degenerate for item in scored)
            print(f"{bad} of {len(scored)} degenerate", file=sys.stderr)
        raise typer.Exit(1 if any(item.verdict.degenerate for item in scored) else 0)
