"""Ctrl-C in any command ends with exit 130 and a line saying so, never silently."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from .fault_server import start_in_thread
from .helpers import REPO


@pytest.mark.timeout(60)
def test_interrupt_always_says_so() -> None:
    server = start_in_thread("hang")
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "k26ctl", "smoke", "--url", url, "--model", "m", "--timeout", "30"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
            env={**os.environ, "NO_COLOR": "1"},
        )
        time.sleep(2.0)  # the first request is in flight against a server that never answers
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=30)
    finally:
        server.hung.set()
        server.shutdown()
    assert proc.returncode == 130
    assert "Traceback" not in stderr
    assert "interrupt" in stderr.lower(), stderr
