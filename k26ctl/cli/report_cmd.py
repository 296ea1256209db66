"""`k26ctl report JSON --html FILE`: the HTML page of a saved --json result, the same page as the
command's own --html (both are made from the JSON document)."""

from __future__ import annotations

from pathlib import Path

import typer

# a smoke document with long answers is a few MB; far beyond that is not a k26ctl result
MAX_RESULT_BYTES = 64 << 20


def report(
    result: Path = typer.Argument(..., metavar="JSON", help="A saved --json result ('-' for stdin)."),
    html: Path = typer.Option(..., "--html", metavar="FILE", help="The page to write."),
) -> None:
    """Write the HTML page of a saved --json result of smoke, deploy, bisect-config (or its log),
    sweep (or its log) or a fleet deploy. Exit 0 written, 78 not such a result, 2 usage."""
    from k26ctl import inputs, jsonsafe
    from k26ctl.cli.common import check_html, write_html
    from k26ctl.errors import ConfigError
    from k26ctl.termsafe import clean

    check_html(html)
    hint = "pass the output of a k26ctl command run with --json"
    if str(result) == "-":
        import sys

        data = sys.stdin.buffer.read(MAX_RESULT_BYTES + 1)
        if len(data) > MAX_RESULT_BYTES:
            raise ConfigError(f"standard input: more than {MAX_RESULT_BYTES} bytes", hint)
        text = inputs.decode(data, "result", "standard input", hint)
    else:
        text = inputs.read_text(result, what="result", max_bytes=MAX_RESULT_BYTES, hint=hint)
    try:
        document = jsonsafe.loads(text)
    except ValueError as exc:
        shown = clean(str(result), limit=300)
        raise ConfigError(f"{shown}: {clean(str(exc), limit=200)}", hint) from None
    write_html(document, html)


def register(app: typer.Typer) -> None:
    app.command("report")(report)
