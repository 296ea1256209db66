"""Load progress from GPU memory in use, a source that does not depend on the journal.

On a real host SGLang's tqdm bar reaches the journal as one record when loading is over, so while the
weights load the journal says little. GPU memory in use says more: `nvidia-smi` (over the same SSH
connection) gives it per GPU, and this host's last successful load recorded how much the ready server
held. The memory climbs from the floor the old server left to that figure; the fraction climbed is
the percentage, and its pace gives the ETA. The journal's load lines still mark the phases.
"""

from __future__ import annotations

from dataclasses import dataclass

from k26ctl.remote.base import Host

QUERY_ARGV = ("nvidia-smi", "--query-gpu=index,memory.used,memory.total", "--format=csv,noheader,nounits")
SAMPLE_INTERVAL = 2.0  # seconds between two nvidia-smi runs while waiting
AT_FLOOR_MIB = 256  # a sample this close to the floor still counts as "not climbing yet"


@dataclass(frozen=True)
class GpuMemory:
    index: int
    used_mib: int
    total_mib: int


def parse_query(text: str) -> list[GpuMemory] | None:
    """`index, used, total` lines (MiB); None when any line is not that (e.g. `[N/A]`)."""
    gpus: list[GpuMemory] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = [part.strip() for part in line.split(",")]
        if len(parts) != 3 or not all(part.isdigit() for part in parts):
            return None
        gpus.append(GpuMemory(int(parts[0]), int(parts[1]), int(parts[2])))
    return gpus or None


def read_gpu_memory(host: Host, timeout: float = 10.0) -> list[GpuMemory] | None:
    """The host's GPU memory now; None when the host has no working nvidia-smi."""
    result = host.run(list(QUERY_ARGV), timeout=timeout)
    if not result.ok:
        return None
    return parse_query(result.stdout)


def used_mib(gpus: list[GpuMemory]) -> int:
    return sum(gpu.used_mib for gpu in gpus)


@dataclass
class MemoryProgress:
    """Samples of the memory in use (all GPUs, MiB) against the last successful load's figure."""

    target_mib: int | None
    floor_mib: int | None = None
    floor_at: float | None = None
    latest_mib: int | None = None
    latest_at: float | None = None

    def add(self, mib: int, at: float) -> None:
        if self.floor_mib is None or mib < self.floor_mib:
            self.floor_mib = mib
        if mib <= self.floor_mib + AT_FLOOR_MIB:
            self.floor_at = at  # the climb (and the pace the ETA uses) starts after the last such sample
        self.latest_mib, self.latest_at = mib, at

    @property
    def climbing(self) -> bool:
        """The memory has left its floor: weights are being loaded."""
        if self.latest_mib is None or self.floor_mib is None:
            return False
        return self.latest_mib > self.floor_mib + AT_FLOOR_MIB

    @property
    def percent(self) -> int | None:
        if self.target_mib is None or self.latest_mib is None or self.floor_mib is None:
            return None
        span = self.target_mib - self.floor_mib
        if span <= 0:
            return None
        climbed = (self.latest_mib - self.floor_mib) / span
        return max(0, min(100, int(climbed * 100)))

    @property
    def eta(self) -> float | None:
        """Seconds left at the pace the memory has climbed since its floor."""
        percent = self.percent
        if percent is None or percent <= 0 or self.floor_at is None or self.latest_at is None:
            return None
        climbing = self.latest_at - self.floor_at
        if climbing <= 0:
            return None
        return climbing * (100 - percent) / percent
