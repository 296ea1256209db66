"""How the lab picks the greedy token of a logits row, with two switches a GPU server has and a CPU does not.

Near ties (K26LAB_NEAR_TIE_RATE=R, K26LAB_NEAR_TIE_GAP=G, default 2.0): on a GPU the kernels chosen for a
batch shape change the rounding of the logits, so where the top two nearly tie the argmax can differ
between batch shapes. The lab models this with a per-row draw keyed on the pass's batch shape and the
row (position, token): a row whose top two logits are within G takes its runner-up with probability R.
The same shape and row always give the same answer, another shape draws again, which is the behaviour
SGLang's deterministic-inference mode exists to remove. The lab model is sure of itself (about 3 % of
its greedy tokens have a runner-up within 2 logits), and bf16 rounding is far smaller than 2 logits, so
G stands in for "close enough to flip": the per-token flip rate is about R x 3 %.

Second-request fault (K26LAB_VERIFY_FAULT=second-request): a verify bug subtle enough to fool text
detectors. In every verify pass the second request of the batch commits its bonus token from the
runner-up of its logits row when the top two are within K26LAB_FAULT_GAP logits (default 4.0): one
plausible wrong token per affected step, in a request that only exists at concurrency 2 or more.

Tool-argument fault (K26LAB_VERIFY_FAULT=tool-arguments): the damage n-gram speculation is reported to do
to tool calls (`parameter=parameter=` in the arguments) and nowhere else. While a request is inside a
Kimi K2 tool call's arguments (after `<|tool_call_argument_begin|>`, before `<|tool_call_end|>`), the
first accepted draft token that is a quote (past the opening `{"`) is committed as `=`: the output
names the wrong token while the KV cache keeps the right one's row, as a verify that commits the wrong
id would. The model goes on as if nothing happened, so the call closes with arguments that are not
JSON, and all other text is verified correctly.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Callable
from dataclasses import dataclass

import torch

VERIFY_FAULTS = ("none", "second-request", "tool-arguments")


def _env_float(name: str, default: float | None) -> float | None:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return float(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a number") from None


@dataclass(frozen=True)
class Numerics:
    near_tie_rate: float = 0.0
    near_tie_gap: float | None = 2.0
    verify_fault: str = "none"
    fault_gap: float = 4.0
    seed: int = 0

    @classmethod
    def from_env(cls) -> Numerics:
        rate = _env_float("K26LAB_NEAR_TIE_RATE", 0.0) or 0.0
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"K26LAB_NEAR_TIE_RATE must be within 0..1, got {rate}")
        fault = os.environ.get("K26LAB_VERIFY_FAULT", "none") or "none"
        if fault not in VERIFY_FAULTS:
            raise ValueError(f"K26LAB_VERIFY_FAULT must be one of {VERIFY_FAULTS}, got {fault!r}")
        return cls(
            near_tie_rate=rate,
            near_tie_gap=_env_float("K26LAB_NEAR_TIE_GAP", 2.0),
            verify_fault=fault,
            fault_gap=_env_float("K26LAB_FAULT_GAP", 4.0) or 4.0,
            seed=int(_env_float("K26LAB_NEAR_TIE_SEED", 0) or 0),
        )

    def _draw(self, shape: tuple[int | str, ...], position: int, token: int) -> float:
        key = f"{self.seed}|{shape}|{position}|{token}".encode()
        return zlib.crc32(key) / 2**32

    def greedy(
        self, logits: torch.Tensor, shape: tuple[int | str, ...], positions: list[int], tokens: list[int]
    ) -> list[int]:
        """The token chosen for every row of `logits` ([rows, vocab]) in a pass of batch shape `shape`.

        `positions` and `tokens` name each row (its position and its input token) for the shape draw.
        """
        best = logits.argmax(dim=-1).tolist()
        if self.near_tie_rate <= 0.0:
            return [int(t) for t in best]
        top = logits.topk(2, dim=-1)
        gaps = (top.values[:, 0] - top.values[:, 1]).tolist()
        runner_up = top.indices[:, 1].tolist()
        out = []
        for row, choice in enumerate(best):
            gap_ok = self.near_tie_gap is None or gaps[row] < self.near_tie_gap
            flip = (
                gap_ok
                and gaps[row] == gaps[row]
                and self._draw(shape, positions[row], tokens[row]) < self.near_tie_rate
            )
            out.append(int(runner_up[row] if flip else choice))
        return out

    def faulty_bonus(self, logits_row: torch.Tensor) -> int | None:
        """The wrong bonus token of the second-request fault, or None when the row is left alone."""
        top = logits_row.topk(2)
        if float(top.values[0] - top.values[1]) < self.fault_gap:
            return int(top.indices[1])
        return None


class ToolArguments:
    """Where a request's output stands in the Kimi K2 tool-call text, by the lab's byte-level token ids."""

    def __init__(self, encode: Callable[[str], list[int]]) -> None:
        self._begin = encode("<|tool_call_argument_begin|>")
        self._end = encode("<|tool_call_end|>")
        self.wrong_token = encode("=")[0]
        self._quote = encode('"')[0]

    def corrupt(self, ids: list[int], token: int) -> bool:
        """Whether `token`, committed after `ids`, is the one the fault replaces: a quote past the
        opening `{"` of an argument span (a begin marker with no end marker after it) that holds no
        corruption yet."""
        if token != self._quote:
            return False
        begin = _last(ids, self._begin)
        if begin is None:
            return False
        span = ids[begin + len(self._begin) :]
        return len(span) >= 2 and _last(span, self._end) is None and self.wrong_token not in span


def _last(ids: list[int], pattern: list[int]) -> int | None:
    n = len(pattern)
    for start in range(len(ids) - n, -1, -1):
        if ids[start : start + n] == pattern:
            return start
    return None
