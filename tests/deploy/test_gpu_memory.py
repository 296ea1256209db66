"""Load progress from GPU memory: the nvidia-smi CSV, and the percentage and ETA against the last load."""

from __future__ import annotations

from k26ctl.deploy.gpu_memory import QUERY_ARGV, GpuMemory, MemoryProgress, parse_query, used_mib

# what `nvidia-smi --query-gpu=index,memory.used,memory.total --format=csv,noheader,nounits` prints
REAL = "0, 81234, 97887\n1, 81190, 97887\n"


def test_the_query_is_the_documented_one() -> None:
    assert QUERY_ARGV == (
        "nvidia-smi",
        "--query-gpu=index,memory.used,memory.total",
        "--format=csv,noheader,nounits",
    )


def test_parse_query() -> None:
    gpus = parse_query(REAL)
    assert gpus == [GpuMemory(0, 81234, 97887), GpuMemory(1, 81190, 97887)]
    assert used_mib(gpus) == 162424


def test_unreadable_answers_give_no_sample() -> None:
    assert parse_query("") is None
    assert parse_query("0, [N/A], 97887\n") is None
    assert parse_query("NVIDIA-SMI has failed because it couldn't communicate with the driver.") is None


def test_percentage_and_eta_climb_from_the_floor_to_the_last_loads_figure() -> None:
    memory = MemoryProgress(target_mib=100_000)
    memory.add(90_000, 0.0)  # the old server still holds its memory
    memory.add(4_000, 2.0)  # stopped: the floor
    assert memory.percent == 0 and memory.eta is None
    memory.add(28_000, 12.0)  # a quarter of the way in 10 s
    assert memory.percent == 25
    assert memory.eta == 30.0
    memory.add(100_000, 40.0)
    assert memory.percent == 100 and memory.eta == 0.0


def test_no_percentage_without_a_recorded_load() -> None:
    memory = MemoryProgress(target_mib=None)
    memory.add(4_000, 0.0)
    memory.add(50_000, 10.0)
    assert memory.percent is None and memory.eta is None and memory.latest_mib == 50_000


def test_memory_at_the_last_figure_shows_99_until_the_load_end_line() -> None:
    """A sample can reach the last load's figure just before the server's load-end line arrives
    (journald wakes its readers in batches): the estimate stops at 99 %, the line says 100 %."""
    from k26ctl.deploy.readiness import ReadinessMachine
    from k26ctl.deploy.wait import _phase, _progress

    machine = ReadinessMachine(start=0.0, timeout=600.0)
    memory = MemoryProgress(target_mib=100_000)
    memory.add(4_000, 1.0)
    memory.add(100_000, 9.0)
    phase = _phase(machine, memory)
    shown = _progress(machine, memory, phase, 9.0, None)
    assert (phase, shown.percent, shown.source) == ("loading weights", 99, "gpu-memory")
    machine.on_journal("Load weight end. elapsed=8.1 s, type=Llama, avail mem=10 GB", 9.2)
    phase = _phase(machine, memory)
    assert (phase, _progress(machine, memory, phase, 9.2, None).percent) == ("warming up", 100)
