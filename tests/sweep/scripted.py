"""A scripted host for fast sweep tests: a deployer that remembers what is live, and a throughput model.

The model mimics the lab's shape: accept length grows with the budget with diminishing returns (wider
trees help only above the chain length), verify time grows with batch x (budget + 1), and budgets
above 7 are incoherent unless the verify-width patch is in the profile.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass, field

from k26ctl.profile import LoadedProfile
from k26ctl.search.step import Deployed
from k26ctl.search.verdict import Verdict
from k26ctl.sweep.load import LevelResult


def key_of(loaded: LoadedProfile) -> tuple[str, int | None, int | None, bool]:
    p = loaded.profile
    return (p.spec.algorithm.value, p.spec.ddtree.budget, p.spec.ddtree.max_topk, bool(p.patches))


def coherent(loaded: LoadedProfile) -> bool:
    algorithm, budget, _topk, patched = key_of(loaded)
    return algorithm != "DDTREE" or patched or (budget or 0) <= 7


def accept_length(loaded: LoadedProfile) -> float:
    algorithm, budget, topk, _ = key_of(loaded)
    if algorithm == "NONE":
        return 1.0
    if algorithm == "DFLASH":
        return 4.0
    b = budget or 1
    chain = 1.0 + 3.2 * (1 - math.exp(-min(b, 7) / 3.5))
    wide = 0.0 if b <= 7 else 0.9 * (1 - math.exp(-(b - 7) / 10)) * min(topk or 1, 4) / 4
    return chain + wide


def tokens_per_s(loaded: LoadedProfile, concurrency: int) -> float:
    algorithm, budget, _, _ = key_of(loaded)
    rows = 1 if algorithm == "NONE" else (8 if algorithm == "DFLASH" else (budget or 1) + 1)
    step_ms = 40.0 + 0.3 * concurrency * rows + (0 if algorithm == "NONE" else 6 + 0.8 * concurrency)
    return concurrency * accept_length(loaded) / step_ms * 1000.0


@dataclass
class ScriptedHost:
    interrupt_at: int | None = None  # raise KeyboardInterrupt during this deploy (1-based)
    live: tuple[str, int | None, int | None, bool] | None = None
    deploys: list[tuple[str, int | None, int | None, bool]] = field(default_factory=list)
    restarts: int = 0
    measured: list[tuple[str, int | None, int | None, bool]] = field(default_factory=list)

    def deploy(self, loaded: LoadedProfile) -> Deployed:
        key = key_of(loaded)
        self.deploys.append(key)
        restarted = key != self.live
        if restarted:
            self.restarts += 1
            self.live = key
        if self.interrupt_at is not None and len(self.deploys) == self.interrupt_at:
            raise KeyboardInterrupt
        verdict = Verdict.GOOD if coherent(loaded) else Verdict.BAD
        return Deployed(True, restarted, "scripted", verdict, loaded=loaded)

    def smoke(self, loaded: LoadedProfile) -> tuple[Verdict, str]:
        return (Verdict.GOOD if coherent(loaded) else Verdict.BAD), "scripted smoke"

    @contextlib.contextmanager
    def server_url(self, loaded: LoadedProfile) -> Iterator[str | None]:
        yield "http://scripted.invalid"

    def measure(self, url: str, loaded: LoadedProfile) -> list[LevelResult]:
        self.measured.append(key_of(loaded))
        levels = []
        for c in (1, 4, 8):
            tps = tokens_per_s(loaded, c)
            itl = 1000.0 * accept_length(loaded) * c / tps
            levels.append(LevelResult(c, 16, 0, tps, accept_length(loaded), 50.0, 80.0, itl, itl * 1.2, 5.0))
        return levels
