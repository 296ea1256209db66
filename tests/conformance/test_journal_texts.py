"""Every journal text k26ctl keys on exists verbatim in real SGLang sources (0.5.15 and 0.5.23), and
k26ctl's patterns match the lines those sources print."""

from __future__ import annotations

import re

import pytest

from k26ctl.deploy import journal_scan
from k26ctl.deploy.journal_scan import READY_TEXT, fatal_pattern, parse_load_seconds, parse_progress
from tests.conformance.sources import Sources

pytestmark = pytest.mark.network_sglang

# pattern -> (file under sglang/srt, the source's literal fragments, a line as that code prints it)
FATAL_SOURCES: dict[str, tuple[str, tuple[str, ...], str]] = {
    "subprocess-exception": (
        "managers/scheduler.py",
        ("Scheduler hit an exception: {traceback}",),
        "[2026-11-29 10:03:01 TP3] Scheduler hit an exception: Traceback (most recent call last):",
    ),
    "sigquit-from-child": (
        "entrypoints/engine.py",
        ("Received sigquit from a child process.",),
        "[2026-11-29 10:03:01] Received sigquit from a child process. It usually means the child failed.",
    ),
    "sigquit-child-failed": (
        "managers/tokenizer_manager.py",
        ("SIGQUIT received. {signum=}, {frame=}. It usually means one child failed.",),
        "[2026-11-29 10:09:41] SIGQUIT received. signum=3, frame=<frame at 0x7f>. It usually means one"
        " child failed.",
    ),
    "scheduler-died": (
        "entrypoints/engine.py",
        ("scheduler died during initialization ",),
        "RuntimeError: Rank 2 scheduler died during initialization (exit code: -9). If exit code is -9 ...",
    ),
    "subprocess-crashed": (
        "utils/watchdog.py",
        ("Subprocess {name} (pid={proc.pid}) crashed ", "with exit code {proc.exitcode}. "),
        "[2026-11-29 10:03:05] Subprocess scheduler_0 (pid=4242) crashed with exit code -9. Triggering"
        " SIGQUIT for cleanup...",
    ),
    "watchdog-timeout": (
        "utils/watchdog.py",
        ("{self.debug_name} watchdog timeout ", "({self.watchdog_timeout=}, {self.soft=})"),
        "[2026-11-29 10:20:00] Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)",
    ),
    "terminated": (
        "entrypoints/engine.py",
        ("terminated with {proc.exitcode}",),
        "[2026-11-29 10:03:05] Scheduler or DataParallelController 4242 terminated with 1",
    ),
    "initialization-failed": (
        "entrypoints/http_server.py",
        ("Initialization failed. warmup error: ",),
        "[2026-11-29 10:03:05] Initialization failed. warmup error: Traceback (most recent call last):",
    ),
}


def test_every_fatal_pattern_has_a_source() -> None:
    names = {name for name, _ in journal_scan._FATAL_PATTERNS}
    assert names == set(FATAL_SOURCES), "a fatal pattern without a real SGLang line (or the reverse)"


@pytest.mark.parametrize("name", sorted(FATAL_SOURCES))
def test_fatal_texts_exist_verbatim_and_match(sources: Sources, name: str) -> None:
    relative, fragments, line = FATAL_SOURCES[name]
    text = sources.text(f"srt/{relative}")
    for fragment in fragments:
        assert fragment in text, f"{fragment!r} not in sglang/srt/{relative} of {sources.version}"
    assert fatal_pattern(line) == name


def test_texts_dropped_for_having_no_source(sources: Sources) -> None:
    for gone in ("Exit code:", "scheduler is dead"):
        assert sources.files_containing(gone) == [], gone
        assert fatal_pattern(f"[2026-11-29 10:03:05] {gone} -9") is None


def test_the_ready_line(sources: Sources) -> None:
    assert sources.files_containing(READY_TEXT) == ["srt/entrypoints/http_server.py"]


def _bar_format(sources: Sources) -> str:
    match = re.search(r'^BAR_FORMAT = "(.*)"$', sources.text("srt/utils/common.py"), re.M)
    assert match, "BAR_FORMAT not found in srt/utils/common.py"
    return match.group(1)


def test_both_loaders_bars_as_tqdm_draws_them(sources: Sources) -> None:
    """tqdm formats BAR_FORMAT; the desc comes from model_loader/weight_utils.py; the record packs
    every update with carriage returns and arrives once, at 100 %."""
    descs = set(re.findall(r'desc="([^"]+)"', sources.text("srt/model_loader/weight_utils.py")))
    assert {"Multi-thread loading shards", "Loading safetensors checkpoint shards"} <= descs
    bar = _bar_format(sources)
    for desc in ("Multi-thread loading shards", "Loading safetensors checkpoint shards"):
        updates = [
            bar.format(
                desc=desc,
                percentage=100 * n / 64,
                n_fmt=str(n),
                total_fmt="64",
                elapsed="00:05",
                remaining="05:00",
                rate_fmt="4.9s/it",
            )
            for n in range(65)
        ]
        progress = parse_progress("\r".join(updates))
        assert progress is not None and (progress.percent, progress.done, progress.total) == (100, 64, 64)
        assert parse_progress(updates[29]) == journal_scan.LoadProgress(45, 29, 64)


def test_load_weight_end(sources: Sources) -> None:
    """`Load weight end. elapsed=X s, ...` (model_executor/model_runner.py), one per rank and model."""
    runner = sources.text("srt/model_executor/model_runner.py")
    assert 'f"Load weight end. "' in runner
    assert re.search(r'f"elapsed=\{[^}]+:\.2f\} s, "', runner)
    line = (
        "[2026-11-29 10:06:00 TP0] Load weight end. elapsed=371.22 s, type=DeepseekV3ForCausalLM,"
        " avail mem=21.05 GB, mem usage=72.36 GB."
    )
    assert parse_load_seconds(line) == 371.22
