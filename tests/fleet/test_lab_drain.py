"""The lab server drains on SIGTERM as SGLang does: /health 503, running requests finish, then exit."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

import k26ctl

pytest.importorskip("torch")
pytestmark = pytest.mark.lab
REPO = Path(k26ctl.__file__).resolve().parents[1]


def test_sigterm_answers_health_503_and_finishes_running_requests(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    log = tmp_path / "server.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "k26ctl.lab.serve", "--host", "127.0.0.1", "--port", str(port)],
            stdout=out, stderr=subprocess.STDOUT, env=env, cwd=tmp_path,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while "ready to roll" not in log.read_text(errors="replace"):
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
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
        assert proc.wait(30) == 0
        text = log.read_text()
        assert "Gracefully exiting... Remaining number of requests 1." in text
    finally:
        if proc.poll() is None:
            proc.kill()
