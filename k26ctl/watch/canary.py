"""One canary cycle: a small temperature-0 smoke run with its probes, detectors and baseline drift.

The canary is carved out of a smoke suite (the profile's, or the shipped default): its temperature-0
prompts with their output capped, no repeats, no sampled requests, no prompt expectations (the capped
answers may stop before an expected word; the baseline judges the answers instead). That pool is
shuffled once with a seed taken from the suite's name and cut into slices of `--prompts` prompts
(the last slice wraps around to the first prompts); each cycle sends one slice, all in flight
together, and the next cycle the next slice. So every cycle costs the same few requests, every
prompt of the suite is asked once every `slice_count` cycles, and a fault that shows only on some
prompts is seen within that many intervals. A re-check runs the same slice, and a slice always holds
the same prompts in the same order, so a state change is confirmed on what first showed it. Each
slice keeps its own baseline. Everything else is smoke's own code: `run_smoke` sends the requests,
runs the detectors and the probes and compares with the baseline.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from k26ctl.errors import K26Error, UnreachableError
from k26ctl.smoke.baseline import Baseline
from k26ctl.smoke.report import SmokeReport
from k26ctl.smoke.runner import SmokeOptions, SmokeTarget, run_smoke
from k26ctl.smoke.suite import Suite

DEFAULT_PROMPTS = 3
DEFAULT_MAX_TOKENS = 64
DEFAULT_PROBE_POSITIONS = 32
# A slice's baseline and a later cycle of it ran in different batches (the slices turn), so a
# near-tie flip of the numerics can part them: the lab's calibrated noise flips rows whose top two
# are within 0.5 logits (benchmarks/README.md, "Watch over the whole suite"), which smoke's 0.25 would
# call a clear choice. A fault parts them at clear choices (ddtree-b7-subtle: margin 2.82).
BASELINE_NEAR_TIE_MARGIN = 0.5


@dataclass(frozen=True)
class CanarySettings:
    prompts: int = DEFAULT_PROMPTS
    max_tokens: int = DEFAULT_MAX_TOKENS
    probe_positions: int = DEFAULT_PROBE_POSITIONS
    request_timeout: float = 30.0
    min_accept_length: float | None = None
    near_tie_margin: float = BASELINE_NEAR_TIE_MARGIN


def canary_suite(suite: Suite, prompts: int = DEFAULT_PROMPTS, max_tokens: int = DEFAULT_MAX_TOKENS) -> Suite:
    """The canary's pool: every temperature-0 prompt of `suite`, capped at `max_tokens`, greedy only,
    in a fixed shuffled order (seeded by the suite's name). `prompts` is the slice size; each cycle
    runs one slice of it (`canary_slice`). Tool-call and schema prompts stay out: the canary runs no
    expectations, and the probes never see them (they are answered by the chat endpoint's parsers)."""
    greedy = [p for p in suite.prompts if 0.0 in suite.temperatures_for(p) and not p.structured]
    if len(greedy) < 2:
        from k26ctl.errors import ConfigError

        raise ConfigError(
            f"suite {suite.name!r} has {len(greedy)} temperature-0 prompt(s); the canary needs 2",
            "use a suite with at least two greedy prompts (--suite)",
        )
    chosen = [
        p.model_copy(
            update={"max_tokens": min(p.max_tokens, max_tokens), "temperatures": [0.0], "expect": []}
        )
        for p in greedy
    ]
    random.Random(f"k26ctl-canary:{suite.name}").shuffle(chosen)
    return suite.model_copy(
        update={
            "name": f"{suite.name}-canary",
            "prompts": chosen,
            "temperatures": [0.0],
            "determinism": False,
            "expectations": False,
        }
    )


def slice_count(pool: Suite, prompts: int) -> int:
    """How many cycles it takes to ask every prompt of the pool once."""
    return max(1, math.ceil(len(pool.prompts) / max(2, prompts)))


def slice_size(pool: Suite, prompts: int) -> int:
    return min(max(2, prompts), len(pool.prompts))


def cycle_period(pool: Suite, prompts: int) -> int:
    """Steps until every prompt was asked at every place of its batch: slices x slice size."""
    return slice_count(pool, prompts) * slice_size(pool, prompts)


def canary_slice(pool: Suite, prompts: int, step: int) -> Suite:
    """The prompts of step `step`: slice `step` modulo the slice count, `prompts` prompts (at least 2;
    the last slice wraps around to the first ones, so every slice costs the same), sent in an order
    rotated once per pass over the pool. A fault of one place in a batch (the second request of
    ddtree-b7-subtle) thus meets every prompt within `cycle_period` steps."""
    count, size = slice_count(pool, prompts), slice_size(pool, prompts)
    start = (step % count) * size
    chosen = [pool.prompts[(start + i) % len(pool.prompts)] for i in range(size)]
    turn = (step // count) % size
    chosen = chosen[turn:] + chosen[:turn]
    return pool.model_copy(update={"prompts": chosen})


@dataclass
class CycleResult:
    """What one cycle saw: the smoke report (None when the server could not be reached) and its cost."""

    started: float  # wall clock (time.time())
    elapsed: float
    report: SmokeReport | None = None
    unreachable: str | None = None
    baseline_recorded: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def requests(self) -> int:
        return self.report.requests_sent if self.report else 0

    @property
    def generated_tokens(self) -> int:
        """Tokens the server generated for this cycle: the answers, plus one per probe."""
        if self.report is None:
            return 0
        answers = sum(r.completion_tokens or 0 for r in self.report.results)
        probes = self.report.probes.checked if self.report.probes else 0
        return answers + probes

    @property
    def prompt_tokens(self) -> int:
        """Prompt tokens sent with the answers (the probes' prefixes mostly hit the prefix cache)."""
        if self.report is None:
            return 0
        return sum(len(r.prompt_ids or ()) for r in self.report.results)


def run_cycle(
    target: SmokeTarget,
    suite: Suite,
    settings: CanarySettings,
    baseline_path: Path,
    probe_flush: Callable[[], str | None] | None = None,
) -> CycleResult:
    """Run the canary once. Unreachable servers are a result, not an exception; a bad baseline file
    is discarded (and recorded again) rather than stopping the watcher."""
    started_wall, started = time.time(), time.monotonic()
    baseline: Baseline | None = None
    if baseline_path.exists():
        try:
            baseline = Baseline.load(baseline_path)
        except K26Error:
            baseline_path.unlink(missing_ok=True)
    options = SmokeOptions(
        near_tie_margin=settings.near_tie_margin,
        concurrency=len(suite.prompts),
        baseline=baseline,
        record_baseline=None if baseline is not None else baseline_path,
        timeout=settings.request_timeout,
        min_accept_length=settings.min_accept_length,
        probes=True,
        probe_positions=settings.probe_positions,
        probe_flush=probe_flush,
    )
    try:
        report = run_smoke(target, suite, options=options)
    except UnreachableError as exc:
        return CycleResult(started_wall, time.monotonic() - started, unreachable=exc.one_line())
    return CycleResult(
        started_wall,
        time.monotonic() - started,
        report=report,
        baseline_recorded=report.baseline_recorded is not None,
    )
