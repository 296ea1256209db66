"""A deterministic GPU step-time model for the lab server (`--lab-step-cost`, K26LAB_STEP_COST).

On the CPU the tiny model's forward pass costs about the same whatever the batch or the verify width,
so speculation looks free and the widest tree always wins. A GPU serving a large model behaves
differently: a forward pass has a floor (every weight is read once per step, whatever the batch), and
above it the time grows with the number of token rows the pass computes (batch x verify width for a
DDTree verify, since SGLang pads every request to budget + 1 rows). A DFlash draft pass costs a little
too, growing with batch x block size. With this model accept length still comes from the real drafter
and verifier, while the time a step takes comes from the formula:

    target pass  = base_ms + row_ms * rows      rows: prompt tokens (prefill), batch (decode),
                                                 batch * verify width (verify: budget + 1 or block size)
    draft pass   = draft_ms + draft_row_ms * batch * block_size     (speculative steps only)

The scheduler sleeps until the modelled time of a step has passed. The steps of a busy period are
laid end to end on the model's clock: a step that the CPU made late (the machine is shared, the
tiny model's own compute is a few ms) is caught up by shorter sleeps in the steps after it, up to
MAX_DEBT seconds behind; `overruns` counts the steps that ended behind the model's clock. When the
scheduler runs out of requests the clock starts afresh. So throughput seen over HTTP follows the
model, not the CPU's load; single inter-token gaps can still show a stall the CPU caused.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, fields

from k26ctl.errors import ConfigError

# Shaped after a large MoE model on 8 GPUs: a ~40 ms memory-bound decode floor, verify compute that
# becomes visible once batch x width reaches about a hundred rows. The figures are also about twice
# what the tiny model's CPU compute of a step takes on two busy cores, so the model, not the CPU, sets
# the pace.
PRESETS: dict[str, dict[str, float]] = {
    "gpu": {"base_ms": 40.0, "row_ms": 0.3, "draft_ms": 6.0, "draft_row_ms": 0.1},
}


@dataclass(frozen=True)
class StepCost:
    base_ms: float = 40.0
    row_ms: float = 0.3
    draft_ms: float = 6.0
    draft_row_ms: float = 0.1

    def target_seconds(self, rows: int) -> float:
        return (self.base_ms + self.row_ms * rows) / 1000.0

    def draft_seconds(self, batch: int, block_size: int) -> float:
        return (self.draft_ms + self.draft_row_ms * batch * block_size) / 1000.0

    def describe(self) -> str:
        return ",".join(f"{f.name.removesuffix('_ms')}={getattr(self, f.name):g}" for f in fields(self))


def parse_step_cost(text: str | None) -> StepCost | None:
    """'' / 'off' -> None; 'gpu' -> the preset; 'gpu,row=0.3' or 'base=20,row=0.15,...' (milliseconds)."""
    if text is None or text.strip().lower() in ("", "off", "none"):
        return None
    values: dict[str, float] = {}
    names = {f.name.removesuffix("_ms"): f.name for f in fields(StepCost)}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        if part in PRESETS:
            values.update(PRESETS[part])
            continue
        key, sep, raw = part.partition("=")
        if not sep or key.strip() not in names:
            raise ConfigError(
                f"step cost {part!r} is not a preset or NAME=MS",
                f"presets: {', '.join(PRESETS)}; names: {', '.join(names)} (milliseconds)",
            )
        try:
            value = float(raw)
        except ValueError:
            raise ConfigError(f"step cost {part!r}: {raw!r} is not a number") from None
        if value < 0:
            raise ConfigError(f"step cost {part!r}: must not be negative")
        values[names[key.strip()]] = value
    return StepCost(**values)


MAX_DEBT = 1.0  # seconds a busy period may run behind the model's clock before it is re-anchored


class StepPacer:
    """Holds each scheduler step until the model's clock says it is done."""

    def __init__(self, cost: StepCost, block_size: int, speculative: bool) -> None:
        self.cost = cost
        self.block_size = block_size
        self.speculative = speculative
        self.overruns = 0  # steps that ended behind the model's clock
        self._deadline: float | None = None  # when the previous step ends on the model's clock

    def idle(self) -> None:
        """Nothing is running: the next step starts a new busy period."""
        self._deadline = None

    def modelled_seconds(self, mode: str, batch: int, rows: int) -> float:
        seconds = self.cost.target_seconds(rows)
        if mode == "verify" and self.speculative:
            seconds += self.cost.draft_seconds(batch, self.block_size)
        return seconds

    def hold(self, began: float, mode: str, batch: int, rows: int) -> None:
        start = began if self._deadline is None else max(self._deadline, began - MAX_DEBT)
        self._deadline = start + self.modelled_seconds(mode, batch, rows)
        remaining = self._deadline - time.monotonic()
        if remaining > 0:
            time.sleep(remaining)
        else:
            self.overruns += 1
