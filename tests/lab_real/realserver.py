"""Helpers for the realsglang tests: profile paths, CLI runs with JSON, and plain HTTP to the server."""

from __future__ import annotations

import json
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from k26ctl.resources import project_root
from tests.support.cli import run_k26ctl

PROFILES = project_root() / "profiles" / "lab"
GOOD = str(PROFILES / "sglang.yaml")
NEWER = str(PROFILES / "sglang-0.5.23.yaml")
PORT = 30000
QUICK = str(Path(__file__).parent / "data" / "quick-real.yaml")
GARBAGE = "sglang.model_path=/opt/sglang/models/k26real-garbage"


def sets(host: Any, *more: str) -> list[str]:
    args = ["--set", f"host.lab={host.name}"]
    for item in more:
        args += ["--set", item]
    return args


def k26_json(*args: str, timeout: float = 900) -> tuple[int, dict[str, Any]]:
    proc = run_k26ctl(*args, "--json", timeout=timeout)
    try:
        doc = json.loads(proc.stdout)
    except ValueError:
        raise AssertionError(
            f"not one JSON document (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
        ) from None
    return proc.returncode, doc


def url(host: Any, path: str) -> str:
    return f"http://{host.address}:{PORT}{path}"


def server_info(host: Any) -> dict[str, Any]:
    response = httpx.get(url(host, "/server_info"), timeout=30)
    response.raise_for_status()
    data: dict[str, Any] = response.json()
    return data


class LongRequest:
    """One long greedy generation in a thread (ignore_eos), to keep the server busy; aborted through
    SGLang's /abort_request on exit, so the test does not wait for it to finish."""

    def __init__(self, host: Any, tokens: int) -> None:
        self.status: int | None = None
        self.error: str | None = None
        self.rid = f"k26-busy-{uuid.uuid4().hex}"
        body = {
            "rid": self.rid,
            "text": "Bees live together in a hive.",
            "sampling_params": {"temperature": 0, "max_new_tokens": tokens, "ignore_eos": True},
        }
        self._thread = threading.Thread(target=self._run, args=(url(host, "/generate"), body), daemon=True)
        self._host = host

    def _run(self, target: str, body: dict[str, Any]) -> None:
        try:
            self.status = httpx.post(target, json=body, timeout=600).status_code
        except httpx.HTTPError as exc:
            self.error = str(exc)

    def __enter__(self) -> LongRequest:
        self._thread.start()
        deadline = time.monotonic() + 120
        while running_requests(self._host) < 1:  # the server says it is busy: an event, not a sleep
            assert time.monotonic() < deadline, "the long request never showed in /metrics"
            assert self._thread.is_alive(), f"the long request ended early: {self.status} {self.error}"
            time.sleep(0.2)
        return self

    def __exit__(self, *exc: object) -> None:
        httpx.post(url(self._host, "/abort_request"), json={"rid": self.rid}, timeout=30)
        self._thread.join(timeout=120)

    @property
    def running(self) -> bool:
        return self._thread.is_alive()


def running_requests(host: Any) -> float:
    """sglang:num_running_reqs from /metrics (summed over its label sets)."""
    text = httpx.get(url(host, "/metrics"), timeout=30).text
    total = 0.0
    for line in text.splitlines():
        if line.startswith("sglang:num_running_reqs"):
            total += float(line.rsplit(" ", 1)[1])
    return total
