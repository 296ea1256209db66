"""The console script's exit: the status main() decided, exactly as the interpreter would have made it."""

from __future__ import annotations

import pytest

from k26ctl.cli.app import _exit_status
from k26ctl.errors import ExitCode


@pytest.mark.parametrize(
    ("code", "status"), [(None, 0), (0, 0), (ExitCode.INTERRUPTED, 130), (141, 141), (2, 2)]
)
def test_numbers_and_none(code: object, status: int) -> None:
    assert _exit_status(code) == status


def test_a_message_is_printed_and_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert _exit_status("error: something") == 1
    assert capsys.readouterr().err == "error: something\n"
