"""`k26ctl lab demo`: registered on the `lab` command group by k26ctl/cli/lab_cmd.py."""

from __future__ import annotations

import sys

import typer

from k26ctl.cli.common import verbose_option


def demo_command(
    name: str = typer.Option("k26lab", "--name", help="Lab host name."),
    verbose: bool = verbose_option("Show each deploy's steps."),
    bisect: bool = typer.Option(
        False, "--bisect", help="Last, bisect the first bad DDTree budget, then reset."
    ),
    fleet: bool = typer.Option(
        False, "--fleet", help="Instead: 3 lab hosts behind sglang-router, a good roll and a halted one."
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
    if fleet:
        _fleet_demo("k26fleet" if name == "k26lab" else name, verbose)
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
    raise typer.Exit(0 if all(o.as_expected for o in outcomes) else 1)


def _fleet_demo(name: str, verbose: bool) -> None:
    from k26ctl.cli.present.fleet import progress
    from k26ctl.lab.fleet_demo import run_fleet_demo

    def show(event: object) -> None:  # member phases always, the deploys' own steps with --verbose
        if verbose or getattr(event, "kind", "") != "deploy":
            progress(event)

    rolls = run_fleet_demo(name, lambda text: print(text, flush=True), show)
    print("summary:")
    for roll in rolls:
        mark = "as expected" if roll.as_expected else "NOT as expected"
        print(f"  {roll.title}: {roll.result.status} ({mark})")
    raise typer.Exit(0 if all(r.as_expected for r in rolls) else 1)


def register(lab_app: typer.Typer) -> None:
    lab_app.command("demo")(demo_command)
