"""A KeyboardInterrupt raised inside a finalizer (where a Ctrl-C lands when the garbage collector runs
one) reaches the main flow instead of being printed as "Exception ignored" and dropped. Each case runs
in a fresh interpreter, so neither pytest's own hook nor its signal handling is involved."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import sys, time
if sys.argv[1] == "hooked":
    from k26ctl.cli.lost_interrupts import redeliver_lost_interrupts
    redeliver_lost_interrupts()

class Finalized:
    def __init__(self, exc):
        self.exc = exc
    def __del__(self):
        raise self.exc

kind = KeyboardInterrupt if sys.argv[2] == "interrupt" else ValueError
try:
    Finalized(kind())  # dropped at once: its __del__ raises
    deadline = time.monotonic() + float(sys.argv[3])
    while time.monotonic() < deadline:
        time.sleep(0.01)
    print("the main flow went on")
except KeyboardInterrupt:
    print("the main flow was interrupted")
"""


def run(hook: str, raised: str, wait: float = 1.0) -> subprocess.CompletedProcess[str]:
    """`wait`: how long the main flow goes on (sleeping) after the finalizer ran, unless interrupted."""
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, hook, raised, str(wait)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_an_interrupt_in_a_finalizer_reaches_the_main_flow_without_a_traceback() -> None:
    proc = run("hooked", "interrupt", wait=30.0)  # it comes within 10 ms
    assert proc.stdout == "the main flow was interrupted\n", (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr, proc.stderr


def test_without_the_hook_python_prints_it_and_drops_it() -> None:
    proc = run("plain", "interrupt")  # what k26ctl's entry point did before
    assert proc.stdout == "the main flow went on\n"
    assert "Exception ignored" in proc.stderr and "KeyboardInterrupt" in proc.stderr, proc.stderr


def test_other_errors_in_a_finalizer_are_still_reported_as_python_does() -> None:
    proc = run("hooked", "error")
    assert proc.stdout == "the main flow went on\n"
    assert "Exception ignored" in proc.stderr and "ValueError" in proc.stderr, proc.stderr


def test_the_console_entry_installs_it() -> None:
    """entry() with main() replaced by a probe: the hook is in place when a command runs."""
    probe = (
        "import sys, k26ctl.cli.app as app\n"
        "app.main = lambda: print(sys.unraisablehook.__module__)\n"
        "app.entry()\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0 and proc.stdout == "k26ctl.cli.lost_interrupts\n", (proc.stdout, proc.stderr)
