"""Telling a lost connection apart from a failed command, and saying what it left on the host.

A command that got no exit status back (returncode -1) lost its connection. One that timed out may
have hit a dead link that no reset announced (a cable pulled, a route gone): a trivial command tells
which. Either way the operator gets exit 69 and one line naming the host state as far as it is known.
"""

from __future__ import annotations

from k26ctl.errors import K26Error, RemoteCommandError, UnreachableError
from k26ctl.remote.base import Host

NO_EXIT_STATUS = -1  # the transport's code for "the channel closed without an exit status"
TIMED_OUT = 124
LIVENESS_TIMEOUT = 3.0


class ConnectionLostError(UnreachableError):
    """The connection to the host broke in the middle of a deploy (exit 69)."""


def connection_lost(host: Host, exc: K26Error) -> bool:
    """True when `exc` means the link to the host broke rather than a command failing on it."""
    if isinstance(exc, UnreachableError):
        return True
    if not isinstance(exc, RemoteCommandError):
        return False
    if exc.returncode == NO_EXIT_STATUS:
        return True
    if exc.returncode != TIMED_OUT:
        return False
    try:
        host.run(["true"], timeout=LIVENESS_TIMEOUT)
    except K26Error:
        return True
    return False


def cause_of(exc: K26Error) -> str:
    if isinstance(exc, RemoteCommandError) and exc.returncode == TIMED_OUT:
        return "the host stopped answering"
    return "the connection dropped"
