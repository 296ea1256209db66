"""Holding Ctrl-C (and SIGTERM) back while a short step that must not stop half-way runs.

Writes are atomic one by one, but apply is several writes (patches, unit) plus a daemon-reload; a
signal in between would leave a tree patched for a unit that was never written. The step finishes,
then the interrupt is raised as KeyboardInterrupt at a point where the host's state is known.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType


@contextmanager
def deferred_interrupts(on_deferred: Callable[[], None] | None = None) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        if not received and on_deferred is not None:
            on_deferred()
        received.append(signum)

    previous = {sig: signal.signal(sig, hold) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if received:
            raise KeyboardInterrupt
