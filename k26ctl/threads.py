"""Running one call in a thread of its own, its outcome delivered as a Future."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
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
