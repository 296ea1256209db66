"""The rescoring probes against real SGLang 0.5.15 on the CPU: sampled answers, and the probes' paired
redraws of them, come back with their decode log-probabilities, one prefill rescoring each agrees with
them (the server samples from its own model), and the verdict is a pass, not a skip."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .realserver import GOOD, k26_json, sets

pytestmark = [pytest.mark.realsglang, pytest.mark.labhost, pytest.mark.lab, pytest.mark.timeout(1200)]

SAMPLED = str(Path(__file__).parent / "data" / "sampled-real.yaml")


def test_real_sampled_answers_are_rescored_and_agree(real_host: Any) -> None:
    code, doc = k26_json("deploy", GOOD, *sets(real_host), "--yes")
    assert code == 0, doc
    code, doc = k26_json("smoke", GOOD, *sets(real_host), "--set", f"smoke.suite={SAMPLED}")
    rescoring = doc["rescoring"]
    assert rescoring["verdict"] in ("pass", "weak-pass"), doc["summary"]
    # the two sampled answers and two paired redraws of each prompt, each copy its own draw
    assert rescoring["redrawn"] == 4 and len(rescoring["answers"]) == 6
    assert rescoring["tokens"] > 120 and rescoring["departure_tail"] >= rescoring["rule"]["alpha"]
    # decode log-probabilities (log softmax(logits / T)) against the prefill's, rescaled to T: within
    # the rule's bound (SGLang's own 0.5 nats in bf16) at every token
    diffs = [(a["decode_reported"], a["max_diff"], a["diff_tokens"]) for a in rescoring["answers"]]
    assert all(reported and diff < 0.5 and over == 0 for reported, diff, over in diffs), diffs
    assert not doc["lossy_levers"]
