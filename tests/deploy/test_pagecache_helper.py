"""The host-side page-cache helper (k26ctl/remote/pagecache.py), run here as the host runs it:
`python -c SOURCE MODE ...` on a file on disk, its pages evicted first with POSIX_FADV_DONTNEED."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from k26ctl.deploy.readahead import helper_source

SIZE = 16 << 20


@pytest.fixture
def weights(tmp_path: Path) -> Path:
    path = tmp_path / "model-00001-of-00001.safetensors"
    with path.open("wb") as f:
        f.write(os.urandom(SIZE))
        f.flush()
        os.fsync(f.fileno())
    return path


def evict(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def run(*args: str) -> list[dict[str, object]]:
    out = subprocess.run(
        [sys.executable, "-c", helper_source(), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    return [json.loads(line) for line in out.splitlines()]


def resident(path: Path) -> int:
    doc = run("residency", str(path))[-1]
    assert doc["bytes"] == SIZE
    return int(str(doc["resident"]))


def test_readahead_brings_evicted_weights_into_the_page_cache(weights: Path) -> None:
    evict(weights)
    before = resident(weights)
    if before > SIZE // 2:
        pytest.skip("this filesystem keeps the pages (tmpfs?): eviction cannot be shown here")
    final = run("readahead", str(64 * 1_000_000), "60", str(weights))[-1]
    assert final == {"done": True, "bytes_read": SIZE, "seconds": final["seconds"], "stopped": ""}
    assert resident(weights) == SIZE > before


def test_readahead_stops_at_its_time_limit(weights: Path) -> None:
    evict(weights)
    lines = run("readahead", str(2 * 1_000_000), "2.5", str(weights))  # 16 MiB at 2 MB/s: 8 s needed
    final = lines[-1]
    assert final["done"] is False and final["stopped"] == "time limit"
    assert 0 < int(str(final["bytes_read"])) < SIZE
    assert any("progress" in line for line in lines[:-1])  # progress about once a second


def test_a_missing_file_is_one_error_line(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", helper_source(), "residency", str(tmp_path / "gone.safetensors")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1 and "gone.safetensors" in json.loads(proc.stdout)["error"]
