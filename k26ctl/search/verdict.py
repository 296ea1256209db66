"""What judging one configuration can say."""

from __future__ import annotations

import enum


class Verdict(str, enum.Enum):
    GOOD = "good"
    BAD = "bad"
    SKIP = "skip"  # this value cannot be judged (the service did not come up, or the judge said so)
