"""An NVIDIA GPU inside the lab host: which device nodes and driver files to bind, found on this machine.

The lab host is an nspawn container over this machine's /usr. CUDA inside it needs the GPU's device
nodes (bound, and allowed by the container's device policy) and the user-space driver (libcuda and
nvidia-smi). Where the driver lives in a folder mounted of its own under /usr (as `/usr/local/nvidia`
on the GPU machines here), the /usr overlay shows the folder empty, so it is bound in as well. The lab's
stand-in `nvidia-smi` is not installed on such a host: load progress comes from the real one.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from k26ctl.errors import ConfigError

# Device nodes CUDA opens: one per GPU, the control node, and the unified-memory pair.
_CONTROL_NODES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset")
# Driver folders whose own mount the /usr overlay would hide; the first that holds nvidia-smi wins.
DRIVER_DIRS = ("/usr/local/nvidia",)
# The device classes the container's policy allows (`DeviceAllow=` names a class as /proc/devices does).
DEVICE_CLASSES = ("char-nvidia", "char-nvidia-uvm", "char-nvidia-caps")


@dataclass(frozen=True)
class GpuParts:
    """What a lab host needs to see of this machine's GPUs."""

    devices: tuple[str, ...]  # /dev nodes to bind read-write
    driver_dir: str | None  # a folder with its own mount (bin/nvidia-smi, lib64/), bound read-only
    nvidia_smi: str  # the real nvidia-smi, as the host sees it

    @property
    def gpu_count(self) -> int:
        return sum(1 for d in self.devices if Path(d).name.removeprefix("nvidia").isdigit())

    @property
    def library_path(self) -> str | None:
        """The folder to put on LD_LIBRARY_PATH inside the host (libcuda), if the driver is bound."""
        if self.driver_dir is None:
            return None
        for sub in ("lib64", "lib"):
            if Path(self.driver_dir, sub).is_dir():
                return str(Path(self.driver_dir, sub))
        return None

    def nspawn_arguments(self) -> list[str]:
        args = [f"--bind={device}" for device in self.devices]
        if self.driver_dir is not None:
            args.append(f"--bind-ro={self.driver_dir}")
        args += [f"--property=DeviceAllow={cls} rwm" for cls in DEVICE_CLASSES]
        return args

    def describe(self) -> str:
        where = f", driver from {self.driver_dir}" if self.driver_dir else ""
        return f"{self.gpu_count} NVIDIA GPU(s) ({', '.join(self.devices)}){where}"


def find_gpu(dev: Path = Path("/dev")) -> GpuParts | None:
    """This machine's NVIDIA GPUs as a lab host would bind them, or None when it has none."""
    gpus = sorted(
        (p for p in dev.glob("nvidia[0-9]*") if p.name.removeprefix("nvidia").isdigit()),
        key=lambda p: int(p.name.removeprefix("nvidia")),
    )
    if not gpus or not (dev / "nvidiactl").exists():
        return None
    devices = [str(p) for p in gpus]
    devices += [str(dev / n) for n in _CONTROL_NODES if (dev / n).exists()]
    caps = dev / "nvidia-caps"
    if caps.is_dir():
        devices += [str(p) for p in sorted(caps.iterdir())]
    driver_dir = next((d for d in DRIVER_DIRS if os.path.ismount(d) or Path(d, "bin").is_dir()), None)
    if driver_dir is not None and Path(driver_dir, "bin", "nvidia-smi").exists():
        smi = str(Path(driver_dir, "bin", "nvidia-smi"))
    else:
        driver_dir = None
        smi = shutil.which("nvidia-smi") or "/usr/bin/nvidia-smi"
    return GpuParts(devices=tuple(devices), driver_dir=driver_dir, nvidia_smi=smi)


def require_gpu(dev: Path = Path("/dev")) -> GpuParts:
    """The GPU parts, or the one-line refusal of `lab host up --gpu` on a machine without a GPU."""
    parts = find_gpu(dev)
    if parts is None:
        raise ConfigError(
            f"--gpu: this machine has no NVIDIA GPU ({dev}/nvidia0 and {dev}/nvidiactl are missing)",
            "run it on a machine with an NVIDIA GPU and its driver, or leave --gpu off for the CPU stand-in",
        )
    return parts


def parse_bind(spec: str) -> tuple[str, str]:
    """`SRC[:DST]` of `lab host up --bind`: an absolute existing folder, bound read-write at DST."""
    src, _, dst = spec.partition(":")
    dst = dst or src
    if not src.startswith("/") or not dst.startswith("/"):
        raise ConfigError(f"--bind {spec!r}: both paths must be absolute", "e.g. --bind /tmp/kit:/opt/kit")
    if not Path(src).is_dir():
        raise ConfigError(f"--bind {spec!r}: {src} is not a folder on this machine", "create it first")
    if any(part in (".", "..") for part in Path(dst).parts):
        raise ConfigError(f"--bind {spec!r}: {dst} must be a plain absolute path", "no . or .. in it")
    return src, dst
