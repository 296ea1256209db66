"""A real Prometheus server (the Debian package's binary) on loopback for tests and benchmarks: its own
config and data directory in a temporary directory, a short scrape interval, stopped at the end."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests.support.ports import free_port


@dataclass
class Prometheus:
    proc: subprocess.Popen[bytes]
    port: int
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant vector of `expr` (its result list)."""
        answer = httpx.get(f"{self.url}/api/v1/query", params={"query": expr}, timeout=10, trust_env=False)
        answer.raise_for_status()
        data = answer.json()
        assert data["status"] == "success", data
        return list(data["data"]["result"])

    def value(self, expr: str) -> float | None:
        result = self.query(expr)
        return float(result[0]["value"][1]) if result else None

    def alerts(self) -> list[dict[str, Any]]:
        answer = httpx.get(f"{self.url}/api/v1/alerts", timeout=10, trust_env=False)
        answer.raise_for_status()
        return list(answer.json()["data"]["alerts"])

    def wait_for(self, expr: str, want: float, timeout: float = 90.0) -> float:
        """Seconds until `expr` evaluates to `want` (AssertionError after `timeout`)."""
        started = time.monotonic()
        seen: float | None = None
        while time.monotonic() - started < timeout:
            seen = self.value(expr)
            if seen == want:
                return time.monotonic() - started
            time.sleep(0.25)
        raise AssertionError(
            f"{expr} stayed {seen}, not {want}, for {timeout} s:\n{self.log_path.read_text()[-2000:]}"
        )


def prometheus_binary() -> str | None:
    return shutil.which("prometheus")


@contextmanager
def prometheus(
    workdir: Path, targets: list[str], rule_files: list[Path] | None = None, scrape_s: float = 1.0
) -> Iterator[Prometheus]:
    binary = prometheus_binary()
    assert binary is not None, "prometheus is not installed (apt-get install prometheus)"
    workdir.mkdir(parents=True, exist_ok=True)
    config = {
        "global": {"scrape_interval": f"{scrape_s:g}s", "evaluation_interval": f"{scrape_s:g}s"},
        "rule_files": [str(p) for p in rule_files or []],
        "scrape_configs": [{"job_name": "k26ctl-watch", "static_configs": [{"targets": targets}]}],
    }
    config_path = workdir / "prometheus.yml"
    config_path.write_text(yaml.safe_dump(config), encoding="utf-8")
    port = free_port()
    log_path = workdir / "prometheus.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [
                binary,
                f"--config.file={config_path}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--storage.tsdb.retention.time=1h",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=workdir,
        )
    server = Prometheus(proc, port, log_path)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{server.url}/-/ready", timeout=2, trust_env=False).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"prometheus did not start:\n{log_path.read_text()[-2000:]}")
            time.sleep(0.2)
        yield server
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
