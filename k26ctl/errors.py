"""One exception tree for every expected failure.

Each error carries the process exit code and a hint, so the CLI can print one clear line and exit
without a traceback. Codes follow sysexits where they fit (69 unavailable, 70 internal error, 78 config).
"""

from __future__ import annotations


class ExitCode:
    OK = 0
    FAILED = 1  # the thing checked failed: smoke found degenerate output, deploy verdict bad
    USAGE = 2
    CHANGES_PENDING = 3  # deploy --check: something would change
    UNAVAILABLE = 69  # host or server unreachable
    SOFTWARE = 70  # k26ctl itself crashed (an unexpected exception): never a verdict
    IO_ERROR = 74  # an output (stdout, a report file) could not be written
    NOPERM = 77  # permission denied (sudo needs a password, not root for the lab host)
    CONFIG = 78  # bad profile or config
    BISECT_SKIP = 125  # git bisect run: this value cannot be judged
    INTERRUPTED = 130  # Ctrl-C, as shells report SIGINT


class K26Error(Exception):
    """Base of all expected failures."""

    exit_code: int = ExitCode.FAILED

    def __init__(self, message: str, hint: str | None = None, *, exit_code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        if exit_code is not None:
            self.exit_code = exit_code

    def one_line(self) -> str:
        return f"{self.message} (hint: {self.hint})" if self.hint else self.message


class ConfigError(K26Error):
    """The profile, a --set override, a suite or another input file is wrong."""

    exit_code = ExitCode.CONFIG


class UsageError(K26Error):
    exit_code = ExitCode.USAGE


class UnreachableError(K26Error):
    """A host or server could not be reached (connection, auth, host key, timeout)."""

    exit_code = ExitCode.UNAVAILABLE


class HostKeyError(UnreachableError):
    """The host key is unknown (without opt-in) or changed."""


class OutputError(K26Error):
    """An output could not be written: stdout closed or full, a report file, a state file."""

    exit_code = ExitCode.IO_ERROR


class PermissionDeniedError(K26Error):
    exit_code = ExitCode.NOPERM


class RemoteCommandError(K26Error):
    """A command on the host exited non-zero where success was required."""

    def __init__(
        self, message: str, hint: str | None = None, *, returncode: int = 1, stderr: str = ""
    ) -> None:
        super().__init__(message, hint)
        self.returncode = returncode
        self.stderr = stderr


class LockHeldError(K26Error):
    """Another operator holds the host-side deploy lock."""

    exit_code = ExitCode.FAILED


class PatchError(K26Error):
    """An anchored source patch cannot be applied as written (anchor missing, wrong count, checksum)."""

    exit_code = ExitCode.FAILED


class Interrupted(K26Error):
    exit_code = ExitCode.INTERRUPTED


def interrupt_behind(exc: BaseException) -> bool:
    """True when the exception is a KeyboardInterrupt or one stands behind it (its cause or context).

    Python before 3.12 wraps whatever a descriptor's __set_name__ raises in RuntimeError, so a Ctrl-C
    that lands while a module defining a dataclass is imported (k26ctl imports most modules lazily, at
    the step that needs them) arrives as "RuntimeError: Error calling __set_name__"."""
    seen: BaseException | None = exc
    for _ in range(32):  # a chain is short; a cycle must not hang the exit
        if seen is None:
            return False
        if isinstance(seen, KeyboardInterrupt):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
