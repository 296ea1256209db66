"""Ctrl-C held back during apply; the recap line; the plain progress lines."""

from __future__ import annotations

import io
import os
import signal

import pytest

from k26ctl.cli.present.deploy import PlainPresenter, result_text
from k26ctl.deploy.interrupts import deferred_interrupts
from k26ctl.deploy.model import DeployEvent, DeployResult, StepResult


def test_interrupt_waits_for_the_step_to_finish() -> None:
    done = []
    notes = []
    with pytest.raises(KeyboardInterrupt), deferred_interrupts(lambda: notes.append("held")):
        os.kill(os.getpid(), signal.SIGINT)
        done.append("first write")
        os.kill(os.getpid(), signal.SIGTERM)
        done.append("second write")
    assert done == ["first write", "second write"]
    assert notes == ["held"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_no_interrupt_no_exception() -> None:
    with deferred_interrupts():
        pass


def test_recap_counts_steps() -> None:
    result = DeployResult(profile="p", host="h", unit="u")
    result.steps = [
        StepResult("validate", "ok"),
        StepResult("unit", "changed"),
        StepResult("restart", "changed"),
        StepResult("readiness", "failed"),
        StepResult("smoke", "skipped"),
    ]
    assert result.recap() == "changed=2 ok=1 failed=1"
    assert result.to_json()["recap"] == {"changed": 2, "ok": 1, "failed": 1, "skipped": 1}
    text = result_text(result)
    assert text.splitlines()[-1].startswith("recap: changed=2 ok=1 failed=1")


def test_failure_text_shows_the_journal_lines() -> None:
    result = DeployResult(profile="p", host="lab host x", unit="u", verdict="failed", exit_code=1)
    result.message = "the service did not become ready: the main process exited (code=exited, status=1)"
    result.journal_lines = ["Traceback (most recent call last):", "RuntimeError: boom"]
    text = result_text(result)
    assert "deploy p on lab host x: failed - the service did not become ready" in text
    assert "  | RuntimeError: boom" in text


def test_plain_presenter_prints_steps_and_progress_by_tens() -> None:
    out = io.StringIO()
    show = PlainPresenter(out)
    show(DeployEvent("phase", "writing /etc/systemd/system/sglang.service", {"name": "unit"}))
    show(DeployEvent("step", "", {"name": "unit", "status": "changed", "detail": "sha abc"}))
    for pct in (1, 5, 12, 19, 45):
        data = {
            "phase": "loading weights",
            "percent": pct,
            "done": pct,
            "total": 100,
            "elapsed": 3.0,
            "eta": 60.0,
        }
        show(DeployEvent("progress", "", data))
    show(DeployEvent("log", "a journal line", {}))
    lines = out.getvalue().splitlines()
    assert lines[0] == "-> writing /etc/systemd/system/sglang.service"
    assert lines[1] == "[changed] unit - sha abc"
    assert [line.split("%")[0].split()[-1] for line in lines[2:]] == ["1", "12", "45"]
    assert "eta 1m00s" in lines[2]
    assert "a journal line" not in out.getvalue()
