"""Every start-up line the restart-phase parser keys on exists in the real release sources (0.5.15 and
0.5.23, with the file each wording lives in), and a line as that code prints it opens the right phase."""

from __future__ import annotations

import pytest

from k26ctl.deploy.phases import LogRecord, parse_phases
from tests.conformance.sources import Sources

pytestmark = pytest.mark.network_sglang

RUNNER = "model_executor/model_runner.py"
GRAPHS_0_5_23 = "model_executor/model_runner_components/cuda_graph_setup.py"
LOAD_END = "Load weight end. elapsed=0.17 s, type=LlamaForCausalLM, avail mem=138.40 GB, mem usage=0.02 GB."
KV_LINE = "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 131072, K size: 0.13 GB, V size: 0.13 GB"
CAPTURE_BEGIN = "Capture target decode CUDA graph begin. backend=full, num_tokens_per_bs=1, bs=[1, 2]"
CAPTURE_END = "Capture target decode CUDA graph end. elapsed=29.90 s, mem usage=0.21 GB, avail mem=137.59 GB."
CAPTURE_END_0_5_23 = "Capture target decode CUDA graph end. bs=[1, 2], elapsed=29.90 s, mem usage=0.21 GB."

# phase -> per release: (file under sglang/srt, the source's literal fragments, a line as it prints)
Row = tuple[str, tuple[str, ...], str]
PHASE_SOURCES: dict[str, dict[str, Row]] = {
    "launch": {
        "0.5.15": (
            "entrypoints/engine.py",
            ('logger.info(f"{server_args=}")',),
            "server_args=ServerArgs(a=1)",
        ),
        "0.5.23": (
            "entrypoints/engine.py",
            ("server_args={_server_args_for_logging(server_args)}",),
            "server_args=ServerArgs(a=1)",
        ),
    },
    "distributed": {
        "0.5.15": (RUNNER, ("Init torch distributed begin.",), "Init torch distributed begin."),
        "0.5.23": ("distributed/bootstrap.py", ("Init parallel begin.",), "Init parallel begin."),
    },
    "model-setup": {
        "0.5.15": (
            RUNNER,
            ("Init torch distributed ends. elapsed=",),
            "Init torch distributed ends. elapsed=0.31 s, mem usage=0.30 GB",
        ),
        "0.5.23": (
            "distributed/bootstrap.py",
            ("Init parallel ends. elapsed=",),
            "Init parallel ends. elapsed=0.3 s",
        ),
    },
    "weights": {
        "0.5.15": (RUNNER, ("Load weight begin. avail mem=",), "Load weight begin. avail mem=138.42 GB"),
        "0.5.23": (RUNNER, ("Load weight begin. avail mem=",), "Load weight begin. avail mem=138.42 GB"),
    },
    "kv-cache": {
        "0.5.15": (RUNNER, ("Load weight end. ", "elapsed=", "mem usage="), LOAD_END),
        "0.5.23": (RUNNER, ("Load weight end. ", "elapsed=", "mem usage="), LOAD_END),
    },
    "init": {
        "0.5.15": (
            "mem_cache/memory_pool.py",
            ("KV Cache is allocated. dtype: {self.dtype}, #tokens: {num_tokens}, K size: ",),
            KV_LINE,
        ),
        "0.5.23": (
            "mem_cache/memory_pool.py",
            ("'is allocated'}. dtype: {self.dtype}, ", "#tokens: {num_tokens}, K size: "),
            KV_LINE,
        ),
    },
    "graphs": {
        "0.5.15": (RUNNER, ("Capture {capture_name} {graph_backend[self.device]} begin. ",), CAPTURE_BEGIN),
        "0.5.23": (
            GRAPHS_0_5_23,
            ("Capture {capture_name} {graph_backend[model_runner.device]} begin. ",),
            CAPTURE_BEGIN,
        ),
    },
    "server-start": {
        "0.5.15": (RUNNER, ("Capture {capture_name} {graph_backend[self.device]} end. ",), CAPTURE_END),
        "0.5.23": (
            GRAPHS_0_5_23,
            ("Capture {capture_name} {graph_backend[model_runner.device]} end. ",),
            CAPTURE_END_0_5_23,
        ),
    },
}

GRAPH_BACKEND_NAMES = ('"cuda": "CUDA graph"', '"cpu": "CPU graph"')
READY = {"0.5.15": "entrypoints/http_server.py", "0.5.23": "entrypoints/http_server.py"}


@pytest.mark.parametrize("phase", sorted(PHASE_SOURCES))
def test_phase_texts_exist_and_open_their_phase(sources: Sources, phase: str) -> None:
    relative, fragments, line = PHASE_SOURCES[phase][sources.version]
    text = sources.text(f"srt/{relative}")
    for fragment in fragments:
        assert fragment in text, f"{fragment!r} not in sglang/srt/{relative} of {sources.version}"
    printed = f"[2026-12-05 10:00:05] {line}"
    result = parse_phases([LogRecord(0, "Started x.service - SGLang."), LogRecord(1_000_000, printed)])
    assert result.phases[-1].name == phase, f"{printed!r} opened {result.phases[-1].name}"


def test_graph_backend_words_of_the_capture_lines(sources: Sources) -> None:
    where = {"0.5.15": RUNNER, "0.5.23": GRAPHS_0_5_23}[sources.version]
    text = sources.text(f"srt/{where}")
    compact = text.replace("\n", " ").replace("  ", " ")
    for name in GRAPH_BACKEND_NAMES:
        assert name in compact or name.replace(": ", ":") in compact, f"{name} not in {where}"


def test_ready_line_and_uvicorn_order(sources: Sources) -> None:
    text = sources.text(f"srt/{READY[sources.version]}")
    assert 'logger.info("The server is fired up and ready to roll!")' in text


def test_engine_startup_timings_line_of_0_5_23(sources: Sources) -> None:
    text = sources.text("srt/entrypoints/engine.py")
    if sources.version == "0.5.15":
        assert "Engine startup timings" not in text
        return
    assert '"Engine startup timings (s): load_weight=%.2f, "' in text
    line = (
        "[2026-12-05 08:02:26] Engine startup timings (s): load_weight=0.02, kv_cache_allocation=0.72, "
        "scheduler_e2e=4.76, cuda_graph={prefill=0.00, decode=1.50}, tokenizer_e2e=30.89"
    )
    result = parse_phases([LogRecord(0, "Started x.service - SGLang."), LogRecord(1, line)])
    assert result.reported == {
        "load_weight": 0.02,
        "kv_cache_allocation": 0.72,
        "scheduler_e2e": 4.76,
        "cuda_graph.prefill": 0.0,
        "cuda_graph.decode": 1.5,
        "tokenizer_e2e": 30.89,
    }
