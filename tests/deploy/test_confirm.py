"""confirm_change: --yes skips the question, no terminal refuses (exit 2), a "no" cancels (exit 1)."""

from __future__ import annotations

import pytest

from k26ctl.deploy.confirm import YES_HINT, confirm_change
from k26ctl.errors import ExitCode, K26Error, UsageError


def _never_asked(question: str) -> bool:
    raise AssertionError(f"asked {question!r} although --yes was given")


def test_yes_skips_the_question() -> None:
    confirm_change(_never_asked, "Restart?", yes=True, command="sweep", no_terminal="x")


def test_no_terminal_is_a_usage_error_with_the_yes_hint() -> None:
    with pytest.raises(UsageError) as caught:
        confirm_change(None, "Restart?", yes=False, command="sweep", no_terminal="a sweep restarts it")
    assert caught.value.message == "a sweep restarts it: nothing was changed"
    assert caught.value.hint == YES_HINT
    assert caught.value.exit_code == ExitCode.USAGE


def test_the_question_reaches_the_prompt_and_a_no_cancels() -> None:
    asked: list[str] = []

    def answer_no(question: str) -> bool:
        asked.append(question)
        return False

    with pytest.raises(K26Error) as caught:
        confirm_change(answer_no, "Restart?", yes=False, command="bisect-config", no_terminal="x")
    assert asked == ["Restart?"]
    assert caught.value.message == "bisect-config cancelled: nothing was changed"
    assert caught.value.exit_code == ExitCode.FAILED


def test_a_yes_on_the_terminal_goes_ahead() -> None:
    confirm_change(lambda question: True, "Restart?", yes=False, command="deploy", no_terminal="x")
