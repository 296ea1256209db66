"""Fault switches of the lab server (K26LAB_FAULT, K26LAB_LOAD_SECONDS) and load failures, seen from
outside: exit codes, HTTP status codes and log lines, on live processes."""

from __future__ import annotations

import json
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.lab_server import LabServer, start_lab_server

pytestmark = pytest.mark.lab


@pytest.fixture(scope="module")
def faulty(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, LabServer]]:
    tmp = tmp_path_factory.mktemp("faults")
    launched = {
        "exit": start_lab_server(tmp, [], env={"K26LAB_FAULT": "exit-during-load"}, wait_ready=False),
        "missing": start_lab_server(tmp, ["--model-path", str(tmp / "no-such-model")], wait_ready=False),
        "crash": start_lab_server(
            tmp, [], env={"K26LAB_FAULT": "scheduler-crash", "K26LAB_HEALTH_TIMEOUT": "1"}, wait_ready=False
        ),
        "slow_hang": start_lab_server(
            tmp, [], env={"K26LAB_FAULT": "hang", "K26LAB_LOAD_SECONDS": "4"}, wait_ready=False
        ),
        "malformed": start_lab_server(tmp, [], env={"K26LAB_FAULT": "malformed"}, wait_ready=False),
    }
    try:
        yield launched
    finally:
        _kill(*launched.values())


@pytest.fixture(scope="module")
def slow_hang(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    """Launched when first used, so that its stretched load is still running when the test polls."""
    server = start_lab_server(
        tmp_path_factory.mktemp("slow"),
        [],
        env={"K26LAB_FAULT": "hang", "K26LAB_LOAD_SECONDS": "4"},
        wait_ready=False,
    )
    yield server
    _kill(server)


def _kill(*servers: LabServer) -> None:
    """SIGKILL: a server with a hung request drains forever on SIGTERM, as real SGLang does (systemd's
    stop timeout ends it there), and how these faulty servers stop is not what this file tests."""
    for server in servers:
        if server.proc.poll() is None:
            server.proc.kill()
    for server in servers:
        server.proc.wait(30)


def _exit_code(server: LabServer, timeout: float = 90) -> int:
    return server.proc.wait(timeout)


def test_exit_during_load(faulty: dict[str, LabServer]) -> None:
    server = faulty["exit"]
    assert _exit_code(server) == 1
    log = server.log()
    assert "Load weight begin." in log and "Traceback (most recent call last)" in log
    assert "Load weight end." not in log and "fired up" not in log


def test_missing_model_path_fails_at_load(faulty: dict[str, LabServer]) -> None:
    server = faulty["missing"]
    assert _exit_code(server) == 1
    log = server.log()
    assert "no-such-model" in log and "does not exist" in log
    assert "fired up" not in log


def test_loading_is_stretched_and_the_port_is_refused_while_loading(slow_hang: LabServer) -> None:
    """As SGLang: nothing listens until the weights are loaded, and tqdm's bar is one record."""
    server = slow_hang
    refused_while_loading = answered_before_load_end = 0
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and "fired up" not in server.log():
        loading = "Load weight begin." in server.log() and "Load weight end." not in server.log()
        try:
            httpx.get(server.url + "/health", timeout=5)
            answered_before_load_end += "Load weight end." not in server.log()
        except httpx.ConnectError:
            refused_while_loading += loading
        time.sleep(0.1)
    server.wait_ready()
    assert refused_while_loading > 0 and answered_before_load_end == 0
    raw = server.log_path.read_bytes().decode(errors="replace")  # log() reads \r as a line end
    bar = [line for line in raw.split("\n") if "Multi-thread loading shards:" in line]
    assert len(bar) == 1, "the updates are joined by carriage returns into one line"
    progress = re.findall(r"Multi-thread loading shards: +(\d+)% Completed \| (\d+)/(\d+)", bar[0])
    assert len(progress) == 17 and progress[-1][0] == "100" and bar[0].count("\r") == 16
    log = server.log()
    elapsed = float(re.search(r"Load weight end\. elapsed=([\d.]+) s", log).group(1))  # type: ignore[union-attr]
    assert elapsed >= 4.0


def test_hanging_generation_while_health_is_fine(slow_hang: LabServer) -> None:
    server = slow_hang.wait_ready()
    assert httpx.get(server.url + "/health", timeout=30).status_code == 200
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(server.url + "/v1/completions", json={"prompt": "The", "max_tokens": 4}, timeout=2)
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(server.url + "/generate", json={"text": "The"}, timeout=2)


def test_scheduler_crash_keeps_http_up(faulty: dict[str, LabServer]) -> None:
    server = faulty["crash"].wait_ready()
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(
            server.url + "/generate",
            json={"text": "The", "sampling_params": {"max_new_tokens": 4}},
            timeout=3,
        )
    assert server.wait_for("Scheduler hit an exception: Traceback (most recent call last)", 10)
    assert server.proc.poll() is None, "the HTTP process stays up"
    assert httpx.get(server.url + "/v1/models", timeout=10).status_code == 200
    assert httpx.get(server.url + "/health", timeout=30).status_code == 503


def test_malformed_responses(faulty: dict[str, LabServer]) -> None:
    server = faulty["malformed"].wait_ready()
    assert httpx.get(server.url + "/health", timeout=30).status_code == 200
    response = httpx.post(
        server.url + "/v1/chat/completions",
        json={"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8},
        timeout=30,
    )
    assert response.status_code == 200 and response.headers["content-type"] == "application/json"
    with pytest.raises(json.JSONDecodeError):
        json.loads(response.text)


def test_sigterm_drains_then_ends_by_its_own_sigkill_as_sglang_does(tmp_path: Path) -> None:
    server = start_lab_server(tmp_path, ["--skip-server-warmup"])
    assert server.stop() == -signal.SIGKILL  # systemd: code=killed, status=9/KILL, as tests/lab_real shows
    log = server.log()
    assert "SIGTERM received. signum=15" in log and "Draining requests and shutting down" in log
    assert "kill_process_tree called" in log


def test_sigint_stops_with_exit_0(tmp_path: Path) -> None:
    server = start_lab_server(tmp_path, ["--skip-server-warmup"])
    server.proc.send_signal(signal.SIGINT)
    assert server.proc.wait(60) == 0
    assert "SIGINT received" in server.log()
