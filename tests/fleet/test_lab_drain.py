"""The lab server drains on SIGTERM as SGLang does: /health 503, running requests finish, then its own
SIGKILL."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.support.lab_server import start_lab_server

pytest.importorskip("torch")
pytestmark = pytest.mark.lab


def test_sigterm_answers_health_503_and_finishes_running_requests(tmp_path: Path) -> None:
    server = start_lab_server(tmp_path, [])
    proc, url = server.proc, server.url
    try:
        deadline = time.monotonic() + 120
        answer: dict[str, object] = {}

        def long_request() -> None:
            r = httpx.post(
                url + "/generate",
                timeout=120,
                json={
                    "text": "Bread is made from",
                    "sampling_params": {"max_new_tokens": 1200, "ignore_eos": True},
                },
            )
            answer["status"] = r.status_code
            answer["tokens"] = r.json()["meta_info"]["completion_tokens"]

        worker = threading.Thread(target=long_request)
        worker.start()
        while httpx.get(url + "/get_load", timeout=5).json()[0]["num_reqs"] < 1:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert httpx.get(url + "/health", timeout=30).status_code == 200
        proc.send_signal(signal.SIGTERM)
        health = 200
        while health == 200 and time.monotonic() < deadline:
            health = httpx.get(url + "/health", timeout=30).status_code
        assert health == 503 and "status" not in answer  # out of every health check, still working
        assert proc.poll() is None
        worker.join(300)
        assert answer == {"status": 200, "tokens": 1200}  # the running request finished in full
        assert proc.wait(30) == -signal.SIGKILL  # as SGLang ends its drain: kill_process_tree on itself
        text = server.log()
        assert "Gracefully exiting... Remaining number of requests 1." in text
        assert "kill_process_tree called" in text
    finally:
        if proc.poll() is None:
            proc.kill()
