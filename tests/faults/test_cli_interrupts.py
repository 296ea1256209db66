"""Ctrl-C in any command ends with exit 130 and a line saying so, never silently."""

from __future__ import annotations

import signal
import time

import pytest

from tests.support.cli import spawn_k26ctl
from tests.support.fake_sglang import start_in_thread


@pytest.mark.timeout(60)
def test_interrupt_always_says_so() -> None:
    server = start_in_thread("hang")
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        proc = spawn_k26ctl("smoke", "--url", url, "--model", "m", "--timeout", "30")
        # interrupt once the first request is in flight against a server that never answers (a
        # fixed sleep fired before start-up had finished on a loaded machine)
        deadline = time.monotonic() + 30
        while server.in_flight == 0 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.in_flight > 0, "k26ctl smoke never sent its first request"
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=30)
    finally:
        server.hung.set()
        server.shutdown()
    assert proc.returncode == 130
    assert "Traceback" not in stderr
    assert "interrupt" in stderr.lower(), stderr
