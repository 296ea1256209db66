"""Progress on stderr: steps done and left, time left from the measured steps, the candidate window.

Rich (colour) on a terminal, plain lines otherwise, so logs and CI output stay greppable.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

from k26ctl.bisect.engine import SearchResult
from k26ctl.bisect.plan import NumericOutcome, Probe
from k26ctl.bisect.session import StepRecord
from k26ctl.search.assignment import describe

_COLOURS = {"good": "green", "bad": "red", "skip": "yellow"}


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class ProgressPrinter:
    def __init__(self, stream: TextIO | None = None, *, rich: bool | None = None) -> None:
        self.stream = stream or sys.stderr
        use_rich = self.stream.isatty() if rich is None else rich
        self.console: Any = None
        if use_rich:
            from k26ctl.cli.common import stderr_console

            self.console = stderr_console()
        self.done = 0

    def _line(self, text: str, markup: str | None = None) -> None:
        if self.console is not None:
            self.console.print(markup if markup is not None else text, soft_wrap=True, highlight=False)
        else:
            print(text, file=self.stream, flush=True)

    def note(self, text: str) -> None:
        self._line(f"  {text}", f"  [dim]{_escape(text)}[/dim]")

    def resumed(self, finished: int, redo: dict[str, Any] | None) -> None:
        self.done = finished
        text = f"bisect: resuming with {finished} finished step(s)"
        if redo is not None:
            what = describe(redo.get("assignment") or {})
            text += f"; step {redo.get('step')} ({what}) was interrupted: redoing it"
        self._line(text, f"[bold]{_escape(text)}[/bold]")

    def started(self, step: int, probe: Probe, eta_seconds: float | None) -> None:
        left = probe.steps_left
        eta = f", ~{_duration(eta_seconds)} left" if eta_seconds is not None else ""
        head = f"bisect: step {step} ({self.done} done, ~{left} left{eta})"
        what = f"{probe.purpose}: {probe.label}"
        self._line(
            f"{head}: {what}  [{probe.window}]",
            f"[bold]{_escape(head)}[/bold]: {_escape(what)}  [dim]\\[{_escape(probe.window)}][/dim]",
        )

    def finished(self, step: int, record: StepRecord) -> None:
        self.done += 1
        verdict = record.verdict.value
        restarted = "restarted" if record.restarted else "no restart"
        tail = f"({record.seconds:.1f} s, {restarted})"
        detail = f" - {record.detail}" if record.detail else ""
        colour = _COLOURS[verdict]
        self._line(
            f"bisect: step {step}: {describe(record.assignment)} -> {verdict} {tail}{detail}",
            f"bisect: step {step}: {_escape(describe(record.assignment))} -> "
            f"[bold {colour}]{verdict}[/bold {colour}] {tail}[dim]{_escape(detail)}[/dim]",
        )

    def deploy_event(self, event: Any) -> None:
        """Forward the interesting deploy events (step results, warnings, failing journal lines)."""
        kind = getattr(event, "kind", "")
        if kind == "step":
            data = getattr(event, "data", {}) or {}
            status = data.get("status", "")
            if status in ("changed", "failed"):
                self.note(f"deploy {data.get('name', '')}: {status} {data.get('detail', '')}".rstrip())
        elif kind in ("warning", "journal"):
            self.note(f"{kind}: {getattr(event, 'message', '')}")


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


def search_summary(result: SearchResult) -> str:
    """The search's answer in one line (the result without --json)."""
    outcome = result.outcome
    tail = f"{len(result.steps)} steps, {result.restarts} restarts"
    if isinstance(outcome, NumericOutcome):
        if outcome.status == "found":
            return f"first bad {outcome.key}={outcome.first_bad!r}, last good {outcome.last_good!r} ({tail})"
        suspects = ", ".join(repr(s) for s in outcome.suspects)
        return f"{outcome.key}: skipped values block the search; first bad is one of {suspects} ({tail})"
    keys = ", ".join(c.key for c in outcome.culprits)
    parts = [f"culprit keys: {keys} (of {len(outcome.changes)} changed)"]
    for key, refined in outcome.refined.items():
        if refined.status == "found":
            parts.append(f"{key}: first bad {refined.first_bad!r}, last good {refined.last_good!r}")
        else:
            parts.append(f"{key}: first bad is one of {refined.suspects!r}")
    return "; ".join(parts) + f" ({tail})"
