"""`k26ctl lab demo`: registered on the `lab` command group by k26ctl/cli/lab_cmd.py."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from k26ctl.cli.common import verbose_option

if TYPE_CHECKING:
    from k26ctl.lab.demo import DemoOutcome


def demo_command(
    name: str = typer.Option("k26lab", "--name", help="Lab host name."),
    verbose: bool = verbose_option("Show each deploy's steps."),
    bisect: bool = typer.Option(
        False, "--bisect", help="Last, bisect the first bad DDTree budget, then reset."
    ),
    fleet: bool = typer.Option(
        False, "--fleet", help="Instead: 3 lab hosts behind a gateway, a good roll, a halted one, the resume."
    ),
    gateway: str = typer.Option(
        "sglang-router", "--gateway", help="With --fleet: the gateway, sglang-router (0.3.2) or smg (1.13.0)."
    ),
    html: Path | None = typer.Option(
        None, "--html", metavar="DIR", help="Write each step's HTML report into DIR (extra: report)."
    ),
    gpu: bool = typer.Option(
        False,
        "--gpu",
        help="Instead: the users' loop on real SGLang 0.5.15 on this machine's NVIDIA GPU (host k26gpu, "
        "made ready by scripts/gpu): broken deploy, bisect, fixed deploy, sweep.",
    ),
    gpu_steps: str = typer.Option(
        "",
        "--steps",
        metavar="broken,bisect,fixed,sweep",
        help="With --gpu: only these steps of the loop (the host is brought up first in any case).",
    ),
    record: Path | None = typer.Option(
        None,
        "--record",
        metavar="FILE",
        help="With --gpu: write every step's outcome, document and the host's restarts as JSON to FILE.",
    ),
    real: bool = typer.Option(
        False,
        "--real",
        help="Instead: real SGLang 0.5.15 from the registry on the lab host (profiles/lab/sglang.yaml), "
        "its untrained-weights twin (smoke fails while /health says 200), then the good one again.",
    ),
) -> None:
    """Lab host up, deploy unpatched DDTree budget 16 (smoke flags it), deploy the patched one
    (smoke passes), print what happened. The host stays up. With --fleet: rolls behind the router
    under chat load (good, halted at the canary, resumed), fleet NAME (default k26fleet) left up."""
    if html is not None:
        _check_html_dir(html)
    if fleet:
        _fleet_demo("k26fleet" if name == "k26lab" else name, verbose, html, gateway)
    if gpu:
        _gpu_demo("k26gpu" if name == "k26lab" else name, verbose, html, gpu_steps, record)
    elif gpu_steps:
        from k26ctl.errors import UsageError

        raise UsageError("--steps goes with --gpu", "e.g. k26ctl lab demo --gpu --steps broken,bisect")
    from k26ctl.cli.present.bisect import ProgressPrinter
    from k26ctl.cli.present.deploy import PlainPresenter
    from k26ctl.lab.demo import DEFAULT_STEPS, DemoContext, run_demo, step_bisect, summary_lines

    presenter = PlainPresenter(sys.stderr, verbose=False) if verbose else None
    printer = ProgressPrinter()
    ctx = DemoContext(
        lab=name,
        on_event=presenter,
        say=lambda text: print(text, flush=True),
        bisect_reporter=printer,
        note=printer.note,
    )
    steps = list(DEFAULT_STEPS)
    if bisect:
        steps.append(step_bisect)
    if real:
        from k26ctl.lab.real.demo import REAL_STEPS, summary_tail

        steps = list(REAL_STEPS)
    outcomes = run_demo(ctx, steps)
    lines = summary_lines(outcomes, name)
    if real:
        lines[-1] = summary_tail(name)
    for line in lines:
        print(line)
    if html is not None:
        _write_pages(outcomes, html)
    raise typer.Exit(0 if all(o.as_expected for o in outcomes) else 1)


def _check_html_dir(directory: Path) -> None:
    from k26ctl.errors import UsageError
    from k26ctl.report import check_available
    from k26ctl.termsafe import clean

    if not directory.is_dir():
        raise UsageError(f"--html {clean(str(directory), limit=300)}: not a directory", "create it first")
    check_available()


def _page_name(title: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in title.lower()).strip("-") + ".html"


def _write_page(document: dict[str, Any], page: Path) -> None:
    """The page and, beside it, the JSON document it was made from (`k26ctl report` takes it)."""
    from k26ctl.cli.common import write_html
    from k26ctl.outputs import write_atomic
    from k26ctl.termsafe import json_text

    write_atomic(page.with_suffix(".json"), json_text(document, indent=2) + "\n")
    write_html(document, page)


def _write_pages(outcomes: list[DemoOutcome], directory: Path) -> None:
    """One page per step with a result: the deploys (their smoke) and the bisect."""
    for outcome in outcomes:
        document = outcome.result.to_json() if outcome.result is not None else outcome.document
        if document is not None:
            _write_page(document, directory / _page_name(outcome.name))


def _fleet_demo(name: str, verbose: bool, html: Path | None = None, gateway: str = "sglang-router") -> None:
    from k26ctl.cli.present.fleet import progress
    from k26ctl.lab.fleet_demo import run_fleet_demo

    def show(event: object) -> None:  # member phases always, the deploys' own steps with --verbose
        if verbose or getattr(event, "kind", "") != "deploy":
            progress(event)

    rolls = run_fleet_demo(name, lambda text: print(text, flush=True), show, gateway=gateway)
    if html is not None:
        for roll in rolls:
            document: dict[str, Any] = {**roll.result.to_json(), "load": roll.load.to_json()}
            _write_page(document, html / _page_name(f"fleet {roll.result.status} {roll.title.split(':')[0]}"))
    print("summary:")
    for roll in rolls:
        mark = "as expected" if roll.as_expected else "NOT as expected"
        print(f"  {roll.title}: {roll.result.status} ({mark})")
    raise typer.Exit(0 if all(r.as_expected for r in rolls) else 1)


def register(lab_app: typer.Typer) -> None:
    lab_app.command("demo")(demo_command)


def _gpu_demo(name: str, verbose: bool, html: Path | None, steps: str, record: Path | None) -> None:
    from k26ctl.cli.present.bisect import ProgressPrinter
    from k26ctl.cli.present.deploy import PlainPresenter
    from k26ctl.lab.demo import DemoContext, run_demo, summary_lines
    from k26ctl.lab.gpu_demo import gpu_loop_steps, gpu_summary_tail, parse_steps

    chosen = parse_steps(steps)
    up, loop = gpu_loop_steps()  # refuses here, before anything is made, on a machine without a GPU
    presenter = PlainPresenter(sys.stderr, verbose=False) if verbose else None
    printer = ProgressPrinter()
    ctx = DemoContext(
        lab=name,
        on_event=presenter,
        say=lambda text: print(text, flush=True),
        bisect_reporter=printer,
        note=printer.note,
    )
    from k26ctl.lab.loop_demo import loop_steps

    outcomes = run_demo(ctx, loop_steps(loop, up, chosen))
    lines = summary_lines(outcomes, name)
    lines[-1:] = gpu_summary_tail(ctx, loop)
    for line in lines:
        print(line)
    if html is not None:
        _write_pages(outcomes, html)
    if record is not None:
        from k26ctl.lab.gpu_demo import loop_record
        from k26ctl.outputs import write_atomic
        from k26ctl.termsafe import json_text

        write_atomic(record, json_text(loop_record(outcomes, loop), indent=2) + "\n")
    raise typer.Exit(0 if all(o.as_expected for o in outcomes) else 1)
