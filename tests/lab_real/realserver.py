"""Helpers for the realsglang tests: profile paths, CLI runs with JSON, and plain HTTP to the server."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx

from k26ctl.resources import project_root
from tests.support.cli import k26_json as cli_k26_json

PROFILES = project_root() / "profiles" / "lab"
GOOD = str(PROFILES / "sglang.yaml")
NEWER = str(PROFILES / "sglang-0.5.23.yaml")
PORT = 30000
QUICK = str(Path(__file__).parent / "data" / "quick-real.yaml")
TRAINED_PATH = "/opt/sglang/models/k26real-tiny"
GARBAGE_PATH = "/opt/sglang/models/k26real-garbage"  # the untrained twin: same tensors, new values
GARBAGE = f"sglang.model_path={GARBAGE_PATH}"


def sets(host: Any, *more: str) -> list[str]:
    args = ["--set", f"host.lab={host.name}"]
    for item in more:
        args += ["--set", item]
    return args


def k26_json(
    *args: str, timeout: float = 900, env: Mapping[str, str] | None = None
) -> tuple[int, dict[str, Any]]:
    """As tests.support.cli.k26_json, with a real server's longer timeout."""
    code, doc = cli_k26_json(*args, timeout=timeout, env=env)
    return code, doc


def url(host: Any, path: str) -> str:
    return f"http://{host.address}:{PORT}{path}"


def swap_weights(host: Any, model_path: str) -> None:
    """SGLang's /update_weights_from_disk: the serving weights replaced in place, no restart."""
    response = httpx.post(
        url(host, "/update_weights_from_disk"), json={"model_path": model_path}, timeout=300
    )
    assert response.status_code == 200 and response.json().get("success"), response.text


def server_info(host: Any) -> dict[str, Any]:
    response = httpx.get(url(host, "/server_info"), timeout=30)
    response.raise_for_status()
    data: dict[str, Any] = response.json()
    return data


class BusyServer:
    """Keeps the server busy until exit: two threads each run long greedy generations (ignore_eos) back
    to back, of different lengths, so one is always in flight while the other starts its next; on exit
    both stop and their current requests are aborted through SGLang's /abort_request. One long request
    alone is not enough: on a quick machine it can end before a slower client step reaches the server."""

    def __init__(self, host: Any, tokens: tuple[int, ...] = (1900, 1300)) -> None:
        self.statuses: list[int] = []
        self.errors: list[str] = []
        self._host = host
        self._stop = threading.Event()
        self._current: dict[int, str] = {}
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._loop, args=(index, count), daemon=True)
            for index, count in enumerate(tokens)
        ]

    def _loop(self, index: int, tokens: int) -> None:
        target = url(self._host, "/generate")
        for _ in range(200):  # bounded: at most 200 generations a thread
            if self._stop.is_set():
                return
            rid = f"k26-busy-{uuid.uuid4().hex}"
            with self._lock:
                self._current[index] = rid
            body = {
                "rid": rid,
                "text": "Bees live together in a hive.",
                "sampling_params": {"temperature": 0, "max_new_tokens": tokens, "ignore_eos": True},
            }
            try:
                status = httpx.post(target, json=body, timeout=600).status_code
            except httpx.HTTPError as exc:
                self.errors.append(str(exc))
                return
            self.statuses.append(status)

    def __enter__(self) -> BusyServer:
        deadline = time.monotonic() + 120
        for thread in self._threads:
            thread.start()
            while running_requests(self._host) < 1:  # the server says it is busy: an event, not a sleep
                assert time.monotonic() < deadline, "the long request never showed in /metrics"
                assert not self.errors, f"the long request failed: {self.errors}"
                time.sleep(0.2)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        with self._lock:
            rids = list(self._current.values())
        for rid in rids:
            httpx.post(url(self._host, "/abort_request"), json={"rid": rid}, timeout=30)
        for thread in self._threads:
            thread.join(timeout=120)
        # a request that started between the snapshot and the stop flag ends on its own (bounded)


def running_requests(host: Any) -> float:
    """sglang:num_running_reqs from /metrics (summed over its label sets)."""
    text = httpx.get(url(host, "/metrics"), timeout=30).text
    total = 0.0
    for line in text.splitlines():
        if line.startswith("sglang:num_running_reqs"):
            total += float(line.rsplit(" ", 1)[1])
    return total
