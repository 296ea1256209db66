"""One sweep point: deploy it (a restart), gate it on smoke, then measure it under load.

Deploying and smoking go through the shared search step, k26ctl.search.step (k26ctl.deploy underneath,
smoke in the deploy, then the suite again only when the deploy had nothing to restart); the load measurement
runs against the server's URL as that seam forwards it. An incoherent point is recorded and never
measured: its throughput would be the speed of garbage.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from k26ctl.profile import LoadedProfile
from k26ctl.search.assignment import Assignment, with_assignment
from k26ctl.search.step import Deployer
from k26ctl.search.verdict import Verdict
from k26ctl.sweep.load import LevelResult, LoadSpec, measure
from k26ctl.sweep.state import PointRecord

Measure = Callable[[str, LoadedProfile], list[LevelResult]]


def http_measure(load: LoadSpec) -> Measure:
    def run(url: str, loaded: LoadedProfile) -> list[LevelResult]:
        return measure(url, load)

    return run


@dataclass
class PointRunner:
    base: LoadedProfile
    deployer: Deployer
    measure: Measure

    def run(self, number: int, assignment: Assignment, role: str, label: str) -> PointRecord:
        began = time.monotonic()

        def record(
            up: bool, coherent: bool, restarted: bool, detail: str, levels: list[LevelResult]
        ) -> PointRecord:
            seconds = time.monotonic() - began
            return PointRecord(
                number, dict(assignment), role, label, up, coherent, restarted, seconds, detail, levels,
                phases=deployed.phases,
            )  # fmt: skip

        loaded = with_assignment(self.base, assignment)
        deployed = self.deployer.deploy(loaded)  # record() below reads its restart phases
        if not deployed.up:
            why = deployed.detail if deployed.refused else f"did not come up: {deployed.detail}"
            return record(False, False, deployed.restarted, why, [])
        if deployed.smoke_verdict is not None:
            verdict, detail = deployed.smoke_verdict, deployed.detail
        else:
            verdict, detail = self.deployer.smoke(loaded)
        if verdict is not Verdict.GOOD:
            return record(True, False, deployed.restarted, f"smoke {verdict.value}: {detail}", [])
        with self.deployer.server_url(loaded) as url:
            if url is None:
                return record(True, True, deployed.restarted, "no URL to measure", [])
            levels = self.measure(url, loaded)
        return record(True, True, deployed.restarted, detail, levels)
