"""Ctrl-C during an SSH call never lands inside paramiko: the call runs in a worker thread and the
main thread only waits, so the connection's locks are released even when the user interrupts."""

from __future__ import annotations

import signal
import threading
import time

import pytest

from k26ctl.remote.ssh import _shielded


def _hold_lock_unprotected(
    lock: threading.Lock, seconds: float, holding: threading.Event | None = None
) -> str:
    # paramiko's shape: acquire, work, release, with a window where an exception would leak the lock
    lock.acquire()
    if holding is not None:
        holding.set()
    # short sleeps: a Ctrl-C that lands just before a long sleep would wait the whole sleep out
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.02)
    lock.release()
    return threading.current_thread().name


def _interrupt_when(holding: threading.Event) -> threading.Thread:
    """Ctrl-C (SIGINT to this process's main thread, as a terminal's arrives where Python handles it)
    once the call holds its lock: never before the call is under way, however late a busy machine runs
    it. Sent to the process instead, the kernel may hand it to this thread, and the main thread's sleep
    would run its course before Python saw it."""

    def interrupt() -> None:
        if holding.wait(60):
            signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)

    thread = threading.Thread(target=interrupt, daemon=True)
    thread.start()
    return thread


def test_the_call_runs_off_the_main_thread() -> None:
    assert threading.current_thread() is threading.main_thread()
    assert _shielded(_hold_lock_unprotected, threading.Lock(), 0) != threading.main_thread().name


def test_an_interrupt_returns_at_once_and_leaves_the_lock_released() -> None:
    lock, holding = threading.Lock(), threading.Event()
    _interrupt_when(holding)
    with pytest.raises(KeyboardInterrupt):
        _shielded(_hold_lock_unprotected, lock, 3.0, holding)
    # back while the call still holds its lock (it sleeps 3 s): the interrupt did not wait for it
    assert lock.locked(), "the interrupt waited for the call"
    assert lock.acquire(timeout=60), "the call's lock was left held"


def test_without_the_shield_the_same_interrupt_leaks_the_lock() -> None:
    """The failure the shield exists for, shown on the same code path (so the test above can fail)."""
    lock, holding = threading.Lock(), threading.Event()
    _interrupt_when(holding)
    with pytest.raises(KeyboardInterrupt):
        _hold_lock_unprotected(lock, 60, holding)
    assert lock.locked()


def test_errors_and_results_cross_back_to_the_caller() -> None:
    assert _shielded(lambda a, b: a + b, 2, 3) == 5
    with pytest.raises(ValueError, match="bad"):
        _shielded(lambda: (_ for _ in ()).throw(ValueError("bad")))
