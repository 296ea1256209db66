"""Ctrl-C in a resumable search says what is kept and how to continue, and still ends the command."""

from __future__ import annotations

import pytest

from k26ctl.cli.common import resumable
from k26ctl.errors import Interrupted


def _interrupt() -> int:
    raise KeyboardInterrupt


def _interrupted_inside_a_step() -> int:
    raise Interrupted("interrupted while restarting")


@pytest.mark.parametrize("call", [_interrupt, _interrupted_inside_a_step])
def test_an_interrupt_names_the_resume_command_and_is_raised_again(
    call: object, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises((KeyboardInterrupt, Interrupted)):
        resumable(call, "sweep", "measured points are saved", "s2")  # type: ignore[arg-type]
    assert capsys.readouterr().err == (
        "sweep: interrupted; measured points are saved. Continue: k26ctl sweep --resume --session s2\n"
    )


def test_the_default_session_needs_no_flag_and_a_result_passes_through(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert resumable(lambda: 7, "bisect-config", "finished steps are saved", "default") == 7
    with pytest.raises(KeyboardInterrupt):
        resumable(_interrupt, "bisect-config", "finished steps are saved", "default")
    assert capsys.readouterr().err.endswith("Continue: k26ctl bisect-config --resume\n")
