"""How repeated tries and `--run` exit codes map onto a bisect step's verdict."""

from __future__ import annotations

from collections.abc import Iterable

from k26ctl.errors import ExitCode, K26Error
from k26ctl.search.verdict import Verdict


class AbortSearch(K26Error):
    """The judge asked to stop the whole search (git bisect run: exit code >= 128 or < 0)."""

    exit_code = 1


def verdict_from_exit_code(code: int, command: str = "") -> Verdict:
    """git bisect run semantics: 0 good, 125 skip, 1-127 bad, anything else aborts the search.

    A negative code is a death by signal (subprocess reports -SIGNUM), which git treats as >= 128.
    """
    if code == 0:
        return Verdict.GOOD
    if code == ExitCode.BISECT_SKIP:
        return Verdict.SKIP
    if 1 <= code <= 127:
        return Verdict.BAD
    shown = f" from {command!r}" if command else ""
    raise AbortSearch(
        f"the verdict command exited {code}{shown}: exit codes >= 128 (or a signal) abort the search",
        "fix the command, then continue with --resume (the interrupted step is redone)",
    )


def combine_tries(verdicts: Iterable[Verdict]) -> Verdict:
    """The rule for `--tries N` (as in ktest's BISECT_TRIES): one bad try makes the step bad;
    otherwise the step is good only if every try was good; any skip without a bad makes it a skip.

    Failures of a sampled bug are intermittent, good output is not proof: so bad wins, and a value is
    called good only when all N tries agree.
    """
    seen = list(verdicts)
    if not seen:
        raise ValueError("no tries")
    if Verdict.BAD in seen:
        return Verdict.BAD
    if Verdict.SKIP in seen:
        return Verdict.SKIP
    return Verdict.GOOD


def tries_needed(verdicts_so_far: Iterable[Verdict], tries: int) -> bool:
    """Whether another try can still change the combined verdict (a bad try settles the step)."""
    seen = list(verdicts_so_far)
    return len(seen) < tries and Verdict.BAD not in seen
