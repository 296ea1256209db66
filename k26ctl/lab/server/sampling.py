"""Sampled decoding for the lab: temperature and top-p, and speculative verification that stays lossless.

SGLang's sampler (0.5.15 layers/sampler.py, `Sampler.forward`) divides the logits by the temperature,
takes the softmax, samples with top-p, and reports log(softmax(logits / T)) of the chosen token as its
decode log-probability (before top-p; the raw log-softmax only with SGLANG_RETURN_ORIGINAL_LOGPROB).
Speculative workers report the same (layers/utils/logprob.py `compute_spec_v2_logprobs`).

Tree verification of sampled requests follows the target-only rule of SGLang's
`tree_speculative_sampling_target_only` (called from speculative/eagle_utils.py:697-715): at each
accepted row one uniform draw `u`; the row's children are tried in order, summing their target
probabilities; a child is accepted when `u <= sum / threshold_acc` or its own probability is at least
`threshold_single`. When none is, the bonus token is drawn from the target distribution with the
children's tokens removed. With both thresholds at 1.0 this emits exactly what the target alone would
sample (the draw lands in a child's interval with that child's probability); below 1.0 it accepts more,
which is the lossy lever k26ctl/validate/lossless.py names.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class Sampling:
    temperature: float
    top_p: float = 1.0
    generator: torch.Generator | None = None

    def scaled_logprobs(self, logits_row: torch.Tensor) -> torch.Tensor:
        """log softmax(logits / T): what SGLang reports as a sampled token's decode log-probability."""
        return torch.log_softmax(logits_row.float() / self.temperature, dim=-1)

    def probs(self, logits_row: torch.Tensor) -> torch.Tensor:
        """The distribution a token is drawn from: softmax(logits / T), cut to the top-p nucleus. A row
        a broken verify filled with NaN draws from what is finite in it (a GPU kernel draws something)."""
        probs = torch.softmax(logits_row.float() / self.temperature, dim=-1)
        if not bool(torch.isfinite(probs).all()):
            probs = torch.nan_to_num(probs, nan=0.0, posinf=0.0, neginf=0.0)
            if float(probs.sum()) <= 0.0:
                probs = torch.zeros_like(probs)
                probs[int(torch.nan_to_num(logits_row.float(), nan=-1e30).argmax())] = 1.0
            probs = probs / probs.sum()
        if self.top_p >= 1.0:
            return probs
        ordered, index = probs.sort(descending=True)
        before = ordered.cumsum(0) - ordered
        ordered[before >= self.top_p] = 0.0  # keep the smallest prefix reaching top_p
        kept = torch.zeros_like(probs).scatter_(0, index, ordered)
        return kept / kept.sum()

    def uniform(self) -> float:
        return float(torch.rand((), generator=self.generator))

    def draw(self, probs: torch.Tensor) -> int:
        return int(torch.multinomial(probs, 1, generator=self.generator))


def sample_walk(
    children: dict[int, list[tuple[int, int]]],
    logits: torch.Tensor,
    sampling: Sampling,
    threshold_single: float = 1.0,
    threshold_acc: float = 1.0,
) -> tuple[list[int], int]:
    """Walk a draft tree with sampled verification. `children[row]` lists (token, child row) in tree
    order; `logits[row]` is the target's row. Returns the accepted rows and the bonus token."""
    threshold_acc = max(threshold_acc, 1e-9)
    accepted: list[int] = []
    row = 0
    while True:
        probs = sampling.probs(logits[row])
        kids = children.get(row, [])
        u = sampling.uniform()
        total = 0.0
        chosen = None
        for token, child in kids:
            p = float(probs[token])
            total += p
            if u <= total / threshold_acc or p >= threshold_single:
                chosen = child
                break
        if chosen is None:
            rest = probs.clone()
            for token, _ in kids:
                rest[token] = 0.0
            if float(rest.sum()) <= 0.0:
                return accepted, int(probs.argmax())
            return accepted, sampling.draw(rest / rest.sum())
        accepted.append(chosen)
        row = chosen
