"""What the detector benchmarks share: counting verdicts on labelled texts (detectors.py and
detector_cv.py import this module, never each other)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Score:
    tp: int = 0
    fn: int = 0
    fp: int = 0
    tn: int = 0

    def add(self, bad: bool, flagged: bool) -> None:
        if bad:
            self.tp += flagged
            self.fn += not flagged
        else:
            self.fp += flagged
            self.tn += not flagged

    @property
    def recall(self) -> float:
        return self.tp / max(self.tp + self.fn, 1)

    @property
    def fpr(self) -> float:
        return self.fp / max(self.fp + self.tn, 1)
