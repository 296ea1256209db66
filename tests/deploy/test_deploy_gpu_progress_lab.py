"""On a real lab host: load progress from GPU memory (nvidia-smi over the deploy's SSH connection),
while the journal holds the load bar as one record at the end, as on a real GPU host."""

from __future__ import annotations

import re
from typing import Any

import pytest

from k26ctl.deploy.gpu_memory import read_gpu_memory, used_mib
from k26ctl.deploy.history import last_gpu_memory_mib, parse_history
from tests.support.cli import run_k26ctl

from .labdeploy import PATCHED, lab_connection, lab_sets

pytestmark = [pytest.mark.labhost, pytest.mark.lab, pytest.mark.timeout(300)]

SLOW_LOAD = "service.environment.K26LAB_LOAD_SECONDS=12"


def test_deploy_shows_a_percentage_and_eta_from_gpu_memory(lab_host: Any) -> None:
    # First deploy: nothing recorded yet, so no percentage; the ready server's memory is recorded.
    first = run_k26ctl(
        "deploy", PATCHED, *lab_sets(lab_host, SLOW_LOAD), "--yes", "--no-smoke", "--force", timeout=240
    )
    assert first.returncode == 0, first.stdout + first.stderr
    with lab_connection(PATCHED, lab_host) as (host, systemd, profile):
        sample = read_gpu_memory(host)
        assert sample is not None and len(sample) == 8, "the lab host answers nvidia-smi's memory query"
        raw = host.read_file(f"/var/lib/k26ctl/{profile.service.name}/history.jsonl", sudo=True)
        recorded = last_gpu_memory_mib(parse_history(raw.decode()))
        assert recorded is not None and recorded == used_mib(sample)

    second = run_k26ctl(
        "deploy", PATCHED, *lab_sets(lab_host, SLOW_LOAD), "--yes", "--no-smoke", "--force", timeout=240
    )
    assert second.returncode == 0, second.stdout + second.stderr
    lines = (second.stdout + second.stderr).splitlines()
    from_memory = [
        line
        for line in lines
        if re.search(r"loading weights \d+% \(GPU memory [\d.]+/[\d.]+ GiB\), .* elapsed, eta \d", line)
    ]
    percents = [int(re.search(r"(\d+)%", line).group(1)) for line in from_memory]  # type: ignore[union-attr]
    assert len(from_memory) >= 2 and 0 < percents[0] < percents[-1] < 100, "\n".join(lines)

    # What the journal held meanwhile: no per-shard lines, the bar as ONE record written at the end.
    with lab_connection(PATCHED, lab_host) as (_, systemd, _profile):
        messages = [e.message for e in systemd.journal(lines=400)]
    start = max(i for i, m in enumerate(messages) if "Load weight begin." in m)
    bars = [m for m in messages[start:] if "Multi-thread loading shards:" in m]
    assert len(bars) == 1 and bars[0].count("\r") == 16 and "100% Completed | 16/16" in bars[0]
