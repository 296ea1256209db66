"""Turning deploy events and results into terminal output.

Progress goes to stderr: a Rich live display on a terminal (weight-load bar with an ETA from the
host's last recorded load time), plain lines otherwise. The final report goes to stdout.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

from k26ctl.deploy.model import DeployEvent, DeployResult
from k26ctl.deploy.plan import Plan

# Steps that change the host: their start is announced, so an operator (or a test) sees where an
# interrupt would land.
_CHANGING_STEPS = (
    "patches",
    "unit",
    "daemon-reload",
    "enable",
    "restart",
    "rollback-patches",
    "rollback-unit",
    "rollback-restart",
)
_BAR_STEPS = ("readiness", "readiness-wait", "rollback-readiness")
_STATUS_MARK = {"ok": "ok", "changed": "changed", "failed": "FAILED", "skipped": "skipped"}


def _fmt_seconds(value: float | None) -> str:
    if value is None:
        return "?"
    minutes, seconds = divmod(int(value + 0.5), 60)
    return f"{minutes}m{seconds:02d}s" if minutes else f"{value:.1f}s"


class PlainPresenter:
    """One line per step and per ten percent of weight loading; journal lines with `verbose`."""

    def __init__(self, stream: TextIO | None = None, *, verbose: bool = False) -> None:
        self.stream = stream or sys.stderr
        self.verbose = verbose
        self._last_progress: tuple[str, int] | None = None

    def __call__(self, event: DeployEvent) -> None:
        data = event.data
        if event.kind == "phase" and data.get("name") in _CHANGING_STEPS:
            self._print(f"-> {event.message}")
        elif event.kind == "step":
            detail = f" - {data.get('detail')}" if data.get("detail") else ""
            status = _STATUS_MARK.get(str(data.get("status")), str(data.get("status")))
            self._print(f"[{status}] {data.get('name')}{detail}")
        elif event.kind == "progress":
            percent = data.get("percent")
            bucket = (str(data.get("phase")), int(percent) // 10 if percent is not None else -1)
            if bucket != self._last_progress:
                self._last_progress = bucket
                eta = data.get("eta")
                eta_text = f", eta {_fmt_seconds(eta)}" if eta is not None else ""
                pct = f" {percent}%{_source(data)}" if percent is not None else _memory(data)
                self._print(
                    f"  {data.get('phase')}{pct}, {_fmt_seconds(data.get('elapsed'))} elapsed{eta_text}"
                )
        elif event.kind == "journal":
            self._print(f"  | {event.message}")
        elif event.kind == "log":
            if self.verbose:
                self._print(f"  > {event.message}")
        elif event.kind == "warning":
            self._print(f"warning: {event.message}")

    def close(self) -> None:
        pass

    def _print(self, text: str) -> None:
        print(text, file=self.stream, flush=True)


class RichPresenter:
    """A live progress bar while the server loads; step lines above it."""

    def __init__(self, console: Any, *, verbose: bool = False) -> None:
        from rich.markup import escape

        self._escape = escape
        from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        self.console = console
        self.verbose = verbose
        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[detail]}"),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        self._task: Any = None

    def __call__(self, event: DeployEvent) -> None:
        data, escape = event.data, self._escape
        if event.kind == "phase" and data.get("name") in _BAR_STEPS:
            self._start_bar(event.message)
        elif event.kind == "phase":
            self._stop_bar()
        elif event.kind == "step":
            if data.get("name") in _BAR_STEPS:
                self._stop_bar()  # the step's own line replaces the bar
            status = str(data.get("status"))
            style = {"ok": "green", "changed": "yellow", "failed": "bold red", "skipped": "dim"}.get(
                status, ""
            )
            detail = f" [dim]- {escape(str(data.get('detail')))}[/dim]" if data.get("detail") else ""
            mark = _STATUS_MARK.get(status, status)
            self.console.print(f"[{style}]{mark:>7}[/{style}] {data.get('name')}{detail}", highlight=False)
        elif event.kind == "progress":
            self._start_bar("waiting for readiness")
            percent = data.get("percent")
            eta = data.get("eta")
            shards = f"{_source(data).strip()} " if percent is not None else ""
            detail = f"{data.get('phase')} {shards}" + (f"eta {_fmt_seconds(eta)}" if eta is not None else "")
            total = 100.0
            self._progress.update(
                self._task, completed=float(percent or 0), total=total, detail=escape(detail)
            )
        elif event.kind == "journal":
            self.console.print(f"  [red]|[/red] {escape(event.message)}", markup=True, highlight=False)
        elif event.kind == "log" and self.verbose:
            self.console.print(f"  [dim]> {escape(event.message)}[/dim]", markup=True, highlight=False)
        elif event.kind == "warning":
            self.console.print(
                f"[yellow]warning:[/yellow] {escape(event.message)}", markup=True, highlight=False
            )

    def _start_bar(self, description: str) -> None:
        if self._task is None:
            self._progress.start()
            self._task = self._progress.add_task(description, total=100.0, detail="")

    def _stop_bar(self) -> None:
        if self._task is not None:
            self._progress.stop()
            columns = self._progress.columns
            self._progress = type(self._progress)(*columns, console=self.console, transient=True)
            self._task = None

    def close(self) -> None:
        self._stop_bar()


def make_presenter(*, rich: bool, verbose: bool = False) -> PlainPresenter | RichPresenter:
    if rich:
        from k26ctl.cli.common import stderr_console

        return RichPresenter(stderr_console(), verbose=verbose)
    return PlainPresenter(verbose=verbose)


def plan_text(plan: Plan) -> str:
    lines = plan.change_lines()
    if not lines:
        return "nothing to change"
    return "\n".join(f"  - {line}" for line in lines)


def result_text(result: DeployResult, *, show_diff: bool = False) -> str:
    """The report printed on stdout at the end."""
    out: list[str] = []
    if show_diff and result.diff:
        out.append(result.diff.rstrip("\n"))
    if result.plan is not None and result.verdict == "changes-pending":
        out.append(f"changes pending on {result.host}:")
        out.append(plan_text(result.plan))
        if result.expected is not None:
            out.append(f"  {result.expected.line()}")
        elif result.plan.restart:
            out.append("  expected downtime: no earlier restart with phases on this host to predict from")
    what = "rollback" if result.kind == "rollback" else "deploy"
    headline = f"{what} {result.profile} on {result.host}: {result.verdict}"
    if result.message and result.message not in ("nothing to do", "changes pending"):
        headline += f" - {result.message}"
    elif result.message:
        headline += f" ({result.message})"
    out.append(headline)
    if result.journal_lines:
        out.append("journal lines that matter:")
        out.extend(f"  | {line}" for line in result.journal_lines)
    if result.smoke is not None:
        out.append(result.smoke.summary())
        if not result.smoke.passed:
            for request in getattr(result.smoke, "failed_results", [])[:6]:
                findings = "; ".join(f.reason() for f in request.failures[:2]) or (request.error or "")
                text = (request.text or "").replace("\n", " ")[:48]
                out.append(f"  - {request.name}: {findings}; output {text!r}")
    if result.load_seconds is not None or result.ready_seconds is not None:
        ready, load = _fmt_seconds(result.ready_seconds), _fmt_seconds(result.load_seconds)
        out.append(f"ready after {ready} (server load {load})")
    if result.readahead is not None and result.readahead.get("outcome") != "skipped":
        r = result.readahead
        out.append(
            f"read ahead: {r['bytes_read'] / (1 << 30):.2f} GiB in {r['seconds']:.1f} s before the stop "
            f"({r['outcome']}); page cache {r['resident_before'] / (1 << 30):.2f} -> "
            f"{(r.get('resident_after') or 0) / (1 << 30):.2f} of {r['bytes'] / (1 << 30):.2f} GiB"
        )
    if result.phases is not None:
        if result.expected is not None:
            e = result.expected
            out.append(
                f"downtime {result.phases.downtime_seconds:.1f} s; expected {e.seconds:.0f} s "
                f"(seen {e.low:.0f}-{e.high:.0f} s, {e.basis()})"
            )
        from k26ctl.cli.present.phases import phase_lines

        out.extend(phase_lines(result.phases.to_json(), indent=""))
    if result.host_state:
        out.append(f"host: {result.host_state}")
    out.append(f"recap: {result.recap()}  ({result.wall_seconds:.2f} s)")
    return "\n".join(out)


def confirm_on_terminal(plan: Plan) -> bool:
    """Ask on the terminal (stderr) before changing the host."""
    print("k26ctl will make these changes:", file=sys.stderr)
    print(plan_text(plan), file=sys.stderr)
    try:
        answer = input("Apply? [y/N] ")
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


def _memory(data: dict[str, object]) -> str:
    """GPU memory in use, when there is no percentage (no earlier load on this host to compare with)."""
    used = data.get("gpu_used_gib")
    return f" (GPU memory {used} GiB in use)" if used else ""


def _source(data: dict[str, object]) -> str:
    """Where a load percentage comes from: the GPU memory in use, or tqdm's shard count."""
    if data.get("source") == "readahead":
        return " of the weights"
    if data.get("source") == "gpu-memory":
        return f" (GPU memory {data.get('gpu_used_gib')}/{data.get('gpu_target_gib')} GiB)"
    return f" ({data.get('done')}/{data.get('total')} shards)"
