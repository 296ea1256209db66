"""Simulated GPU memory for the lab: the server writes it while it "loads"; `nvidia-smi` on the lab host
reads it back in the CSV that `nvidia-smi --query-gpu=index,memory.used,memory.total
--format=csv,noheader,nounits` prints on a real host (`index, used MiB, total MiB`, one line per GPU).

The state file names the writing process; once that process is gone the memory reads as free again,
as on a real host after the server exits (or is killed). The server writes it only when K26LAB_GPU_STATE
names it (the lab profiles do); a lab server run elsewhere leaves no file behind.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

STATE_ENV = "K26LAB_GPU_STATE"
DEFAULT_STATE = "/run/k26lab/gpu-memory"
GPUS = 8
TOTAL_MIB = 97887  # an RTX PRO 6000 Blackwell: 96 GB
CONTEXT_MIB = 514  # what a CUDA context holds before any weight is loaded
WEIGHTS_MIB = 72_000  # per GPU for the weights of the real model at tp 8
KV_POOL_MIB = 16_000  # per GPU for the KV pool and CUDA graphs allocated after the weights
QUERY = ("--query-gpu=index,memory.used,memory.total", "--format=csv,noheader,nounits")
# What `k26ctl doctor` asks: the cards, their driver and compute capability; and the plain header
# (CUDA version). The lab's answers describe the simulated target host, not this machine.
IDENTITY_QUERY = (
    "--query-gpu=index,name,driver_version,compute_cap,memory.total",
    "--format=csv,noheader,nounits",
)
LAB_GPU_NAME = "NVIDIA RTX PRO 6000 Blackwell Server Edition (lab stand-in)"
LAB_DRIVER, LAB_CUDA, LAB_COMPUTE_CAP = "580.95.05", "13.0", "12.0"


def state_path() -> Path:
    return Path(os.environ.get(STATE_ENV) or DEFAULT_STATE)


class SimulatedGpus:
    """What the lab server "holds" on eight GPUs; every change is written atomically to the state file."""

    def __init__(self, path: Path | None = None) -> None:
        configured = os.environ.get(STATE_ENV)
        self.path = path or (Path(configured) if configured else None)
        self.used_mib = CONTEXT_MIB

    def set_used(self, mib: int) -> None:
        self.used_mib = mib
        if self.path is None:
            return
        lines = [f"pid {os.getpid()}", *(f"{i}, {mib}, {TOTAL_MIB}" for i in range(GPUS))]
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(self.path.name + f".{os.getpid()}.tmp")
            tmp.write_text("\n".join(lines) + "\n")
            os.replace(tmp, self.path)
        except OSError:
            pass  # not on a lab host (no writable state dir): nothing reads it there

    def loading(self, fraction: float) -> None:
        self.set_used(CONTEXT_MIB + round(WEIGHTS_MIB * min(1.0, max(0.0, fraction))))

    def pool_allocated(self) -> None:
        self.set_used(CONTEXT_MIB + WEIGHTS_MIB + KV_POOL_MIB)

    def release(self) -> None:
        self.set_used(0)

    def avail_gb(self) -> float:
        """Free memory of one GPU, as SGLang's `avail mem=` reports it."""
        return (TOTAL_MIB - self.used_mib) / 1024

    def weights_gb(self) -> float:
        return max(0, self.used_mib - CONTEXT_MIB) / 1024


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_state(path: Path) -> list[str]:
    """The CSV lines nvidia-smi prints now: the writer's figures while it runs, free memory otherwise."""
    idle = [f"{i}, 0, {TOTAL_MIB}" for i in range(GPUS)]
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return idle
    if not lines or not lines[0].startswith("pid "):
        return idle
    try:
        pid = int(lines[0].split()[1])
    except (IndexError, ValueError):
        return idle
    return lines[1:] if _alive(pid) else idle


def main(argv: list[str] | None = None) -> int:
    """The lab host's `nvidia-smi`: answers the memory query readiness uses and what doctor asks."""
    args = sys.argv[1:] if argv is None else argv
    if sorted(args) == sorted(IDENTITY_QUERY):
        rows = [f"{i}, {LAB_GPU_NAME}, {LAB_DRIVER}, {LAB_COMPUTE_CAP}, {TOTAL_MIB}" for i in range(GPUS)]
        sys.stdout.write("".join(row + "\n" for row in rows))
        return 0
    if not args:
        sys.stdout.write(
            f"| NVIDIA-SMI {LAB_DRIVER}   Driver Version: {LAB_DRIVER}   CUDA Version: {LAB_CUDA} |\n"
        )
        return 0
    if sorted(args) != sorted(QUERY):
        sys.stderr.write(f"lab nvidia-smi answers only: nvidia-smi {' '.join(QUERY)}\n")
        return 2
    sys.stdout.write("".join(line + "\n" for line in read_state(state_path())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
