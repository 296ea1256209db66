"""`lab host up --gpu` on CPU: which device nodes, driver folder and policy a GPU host gets, found in a
/dev laid out as the GPU machines have it; the refusal on a machine without a GPU; the nspawn argv."""

from __future__ import annotations

from pathlib import Path

import pytest

from k26ctl.errors import ConfigError
from k26ctl.lab.host import machine
from k26ctl.lab.host.gpu import GpuParts, find_gpu, parse_bind, require_gpu
from tests.support.cli import run_here


def _dev(tmp_path: Path, *names: str) -> Path:
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in names:
        (dev / name).parent.mkdir(parents=True, exist_ok=True)
        (dev / name).touch()
    return dev


def test_every_gpu_and_the_control_nodes_are_bound_in_order(tmp_path: Path) -> None:
    dev = _dev(
        tmp_path, "nvidia1", "nvidia0", "nvidia10", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "null"
    )
    parts = find_gpu(dev)
    assert parts is not None and parts.gpu_count == 3
    assert [Path(d).name for d in parts.devices] == [
        "nvidia0", "nvidia1", "nvidia10", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools",
    ]  # fmt: skip
    args = parts.nspawn_arguments()
    assert f"--bind={dev / 'nvidia10'}" in args and f"--bind={dev / 'nvidiactl'}" in args
    assert "--property=DeviceAllow=char-nvidia rwm" in args


def test_no_gpu_is_none_and_gpu_is_refused_in_one_line(tmp_path: Path) -> None:
    assert find_gpu(_dev(tmp_path, "null", "nvidiactl")) is None  # a control node alone is no GPU
    with pytest.raises(ConfigError) as info:
        require_gpu(tmp_path / "dev")
    assert "has no NVIDIA GPU" in info.value.message and "\n" not in info.value.message
    assert info.value.exit_code == 78


def test_cli_refuses_gpu_without_a_gpu_before_making_anything() -> None:
    if find_gpu() is not None:
        pytest.skip("this machine has a GPU")
    result = run_here("lab", "host", "up", "--gpu", "--name", "nogpu-refusal")
    assert result.returncode == 78
    assert result.stderr.startswith("error: --gpu: this machine has no NVIDIA GPU")
    assert not machine.state_dir("nogpu-refusal").exists()
    demo = run_here("lab", "demo", "--gpu")
    assert demo.returncode == 78 and "no NVIDIA GPU" in demo.stderr


def test_a_gpu_host_gets_the_real_nvidia_smi_and_the_binds(tmp_path: Path) -> None:
    parts = GpuParts(
        devices=("/dev/nvidia0", "/dev/nvidiactl"),
        driver_dir="/usr/local/nvidia",
        nvidia_smi="/usr/local/nvidia/bin/nvidia-smi",
    )
    argv = machine._nspawn_argv(tmp_path, "g1", "ns", None, parts, [("/tmp/kit", "/opt/kit")])
    assert "--bind=/dev/nvidia0" in argv and "--bind-ro=/usr/local/nvidia" in argv
    assert "--bind=/tmp/kit:/opt/kit" in argv
    wrapper = (tmp_path / "upper" / "usr" / "local" / "bin" / "nvidia-smi").read_text()
    assert wrapper.endswith('exec /usr/local/nvidia/bin/nvidia-smi "$@"\n')
    cpu = machine._nspawn_argv(tmp_path / "cpu", "c1", "ns")
    assert not any("nvidia" in a for a in cpu)
    stand_in = (tmp_path / "cpu" / "upper" / "usr" / "local" / "bin" / "nvidia-smi").read_text()
    assert "k26ctl.lab.server.gpu_memory" in stand_in


@pytest.mark.parametrize(
    ("spec", "problem"),
    [("relative:/opt/x", "absolute"), ("/no/such/folder", "not a folder"), ("/tmp:/opt/../etc", "plain")],
)
def test_bad_binds_are_one_line_errors(spec: str, problem: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_bind(spec)
    assert problem in info.value.message


def test_a_bind_without_destination_keeps_its_path(tmp_path: Path) -> None:
    assert parse_bind(str(tmp_path)) == (str(tmp_path), str(tmp_path))
