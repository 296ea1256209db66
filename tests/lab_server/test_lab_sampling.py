"""The lab's sampled verification: with thresholds at 1.0 a draft tree changes nothing about what is
drawn (SGLang's target-only rule is lossless); relaxed thresholds accept drafts the target alone would
rarely draw; top-p cuts the tail; NaN rows still draw a token."""

from __future__ import annotations

from collections import Counter

import torch

from k26ctl.lab.server.sampling import Sampling, sample_walk

LOGITS = torch.tensor([2.0, 1.5, 0.0, -1.0, -3.0])


def _first_tokens(draft: list[int], single: float, acc: float, n: int = 6000) -> Counter[int]:
    """The first committed token over n walks of a one-level tree whose children are `draft`."""
    sampling = Sampling(0.7, 1.0, torch.Generator().manual_seed(3))
    children = {0: [(tok, row + 1) for row, tok in enumerate(draft)]}
    rows = LOGITS.repeat(len(draft) + 1, 1)
    seen: Counter[int] = Counter()
    for _ in range(n):
        accepted, bonus = sample_walk(children, rows, sampling, single, acc)
        seen[draft[accepted[0] - 1] if accepted else bonus] += 1
    return seen


def test_lossless_at_thresholds_one_whatever_the_draft() -> None:
    target = torch.softmax(LOGITS / 0.7, dim=-1)
    for draft in ([4], [3, 4], [0, 1]):
        seen = _first_tokens(draft, 1.0, 1.0)
        for token, p in enumerate(target.tolist()):
            assert abs(seen[token] / 6000 - p) < 0.025, (draft, token, seen)


def test_relaxed_thresholds_overdraw_an_unlikely_draft() -> None:
    target = torch.softmax(LOGITS / 0.7, dim=-1)
    seen = _first_tokens([4], 1.0, 0.01)
    assert seen[4] / 6000 > 10 * float(target[4])


def test_top_p_cuts_the_tail_and_nan_rows_still_draw() -> None:
    probs = Sampling(0.7, 0.8).probs(LOGITS)
    assert float(probs[3]) == 0.0 and float(probs[4]) == 0.0 and abs(float(probs.sum()) - 1) < 1e-6
    nan = torch.tensor([float("nan"), 1.0, 0.5])
    assert abs(float(Sampling(0.7).probs(nan).sum()) - 1) < 1e-6
