"""Running one call in a thread of its own, its outcome delivered as a Future."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, wait
from typing import Any, TypeVar

T = TypeVar("T")


def in_thread(fn: Callable[..., T], *args: Any, name: str) -> Future[T]:
    """Start `fn(*args)` in a daemon thread; its result or exception (any, Ctrl-C included) is the
    Future's. Daemon: a call stuck on a dead network never keeps k26ctl from exiting."""
    future: Future[T] = Future()

    def run() -> None:
        try:
            future.set_result(fn(*args))
        except BaseException as exc:
            future.set_exception(exc)

    threading.Thread(target=run, name=name, daemon=True).start()
    return future


# How long the main thread waits at a time for a worker's result: the bound on how late it sees Ctrl-C.
SIGNAL_SLICE = 0.2


def result_interruptibly(future: Future[T]) -> T:
    """`future.result()` in the main thread, with Ctrl-C raised within SIGNAL_SLICE seconds.

    A signal whose C handler runs just before the main thread blocks on the Future's lock (or that
    the kernel hands to another thread) does not wake that wait: CPython would raise the
    KeyboardInterrupt only once the call had ended. Waiting in slices lets the interpreter run the
    pending handler at the end of each slice."""
    while not future.done():
        wait([future], timeout=SIGNAL_SLICE)
    return future.result()
