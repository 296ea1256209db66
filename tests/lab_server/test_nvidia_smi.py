"""The lab host's nvidia-smi: the same CSV contract, fed by the lab server's simulated GPU memory."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from k26ctl.deploy.gpu_memory import QUERY_ARGV, parse_query, used_mib
from k26ctl.lab.server import gpu_memory as lab

QUERY = list(QUERY_ARGV[1:])


def run_smi(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    code = "from k26ctl.lab.server.gpu_memory import main; raise SystemExit(main())"
    env = {"K26LAB_GPU_STATE": str(state), "PATH": "/usr/bin:/bin"}
    root = str(Path(__file__).resolve().parents[2])
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env={**env, "PYTHONPATH": root}
    )


def test_loading_raises_the_memory_k26ctl_reads(tmp_path: Path) -> None:
    state = tmp_path / "gpu-memory"
    gpus = lab.SimulatedGpus(state)
    gpus.loading(0.5)
    out = run_smi(state, *QUERY)
    sample = parse_query(out.stdout)
    assert out.returncode == 0 and sample is not None and len(sample) == lab.GPUS
    assert used_mib(sample) == lab.GPUS * (lab.CONTEXT_MIB + lab.WEIGHTS_MIB // 2)
    gpus.pool_allocated()
    full = parse_query(run_smi(state, *QUERY).stdout)
    assert full is not None and all(g.used_mib > lab.WEIGHTS_MIB for g in full)
    gpus.release()
    free = parse_query(run_smi(state, *QUERY).stdout)
    assert free is not None and used_mib(free) == 0


def test_memory_of_a_process_that_is_gone_reads_as_free(tmp_path: Path) -> None:
    state = tmp_path / "gpu-memory"
    writer = (
        "import sys; from pathlib import Path; from k26ctl.lab.server.gpu_memory import SimulatedGpus;"
        "SimulatedGpus(Path(sys.argv[1])).pool_allocated()"
    )
    root = str(Path(__file__).resolve().parents[2])
    subprocess.run([sys.executable, "-c", writer, str(state)], check=True, env={"PYTHONPATH": root})
    assert "pid " in state.read_text()  # the writer (killed or exited) left its figures behind
    sample = parse_query(run_smi(state, *QUERY).stdout)
    assert sample is not None and used_mib(sample) == 0


def test_only_the_memory_query_is_answered(tmp_path: Path) -> None:
    out = run_smi(tmp_path / "none", "-L")
    assert out.returncode == 2 and "--query-gpu=index,memory.used,memory.total" in out.stderr


@pytest.mark.parametrize("configured", [False, True])
def test_the_server_writes_only_where_it_is_told(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, configured: bool
) -> None:
    target = tmp_path / "state"
    if configured:
        monkeypatch.setenv(lab.STATE_ENV, str(target))
    else:
        monkeypatch.delenv(lab.STATE_ENV, raising=False)
    lab.SimulatedGpus().loading(1.0)
    assert target.exists() is configured
