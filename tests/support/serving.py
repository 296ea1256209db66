"""Test HTTP servers served from a daemon thread of the test's own process.

socketserver's `serve_forever` looks for a `shutdown()` request once per poll interval, half a second
by default, and `shutdown()` waits for it: every test that stopped a server waited up to that long
for nothing. These servers look every 20 ms.
"""

from __future__ import annotations

import socketserver
import threading

STOP_POLL_S = 0.02


def serve_in_thread(server: socketserver.BaseServer) -> threading.Thread:
    """Start `server` on a daemon thread; `server.shutdown()` then returns within STOP_POLL_S."""
    thread = threading.Thread(target=server.serve_forever, args=(STOP_POLL_S,), daemon=True)
    thread.start()
    return thread
