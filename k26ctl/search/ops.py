"""The steps every search command takes around its strategy: confirm the restarts, and reset (put
back what was live before the search, then forget the session)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from k26ctl.deploy.confirm import confirm_change
from k26ctl.documents import tagged
from k26ctl.errors import K26Error
from k26ctl.profile import LoadedProfile
from k26ctl.search.restore import restore_live
from k26ctl.search.session import SearchSession

Confirm = Callable[[str], bool]


def confirm_restarts(
    session: SearchSession, confirm: Confirm | None, question: str, *, yes: bool, per: str
) -> None:
    """Ask before a search restarts the service once per `per` (step, point); --yes answers."""
    confirm_change(
        confirm,
        question,
        yes=yes,
        command=session.kind.command,
        no_terminal=f"a {session.kind.what} restarts the service once per {per} and there is no terminal to "
        "confirm it",
    )


@dataclass
class ResetResult:
    session: str
    restored: bool
    message: str
    kind: str = "bisect-reset"  # the document kind of its --json (k26ctl/documents.py)

    def to_json(self) -> dict[str, Any]:
        return tagged(self.kind, {k: v for k, v in asdict(self).items() if k != "kind"})


def reset_session(
    session: SearchSession,
    original: dict[str, Any] | None,
    base: Callable[[], LoadedProfile],
    ask: Callable[[str], None],
    *,
    restore: bool,
    on_event: Callable[[Any], None] | None = None,
    accept_new_host_key: bool = False,
    nothing_captured: str = "session removed; the host was left as it is",
) -> ResetResult:
    """Restore `original` (what was live before the search, captured at its start) on the host of
    `base()`, after `ask` confirms; then remove the session. A failed restore keeps the session."""
    what = session.kind.what
    with session.locked():
        restored, message = False, "session removed; the host was left as it is"
        if restore and original is not None:
            ask(f"Restore the unit and patches that were live before the {what}, and restart?")
            outcome = restore_live(
                base(),
                original,
                on_event=on_event,
                accept_new_host_key=accept_new_host_key,
                reason=f"{session.kind.command} reset: the deployment live before the {what}",
            )
            if not outcome.ready:
                raise K26Error(
                    f"reset: {outcome.message}; the session is kept",
                    "check the service (k26ctl status PROFILE), then run reset again",
                )
            restored, message = True, f"restored the deployment from before the {what}: {outcome.message}"
        elif restore:
            message = nothing_captured
        session.remove()
    return ResetResult(session.name, restored, message, f"{session.kind.noun}-reset")
