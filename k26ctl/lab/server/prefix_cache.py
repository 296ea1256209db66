"""The lab's prefix cache: a finished request's KV is kept and reused by later requests, as SGLang's
radix cache does.

A finished request leaves its token ids and the KV slots holding them (prompt and output, less the last
output token, whose KV was never written). A new request whose prompt starts with a cached sequence
reuses that KV and computes only the rest; at least its last prompt token is always computed, since its
logits give the first output token. The KV is reused as it was written: KV written by a broken verify
pass stays broken for whoever reuses it, which is why a self-consistency probe must flush first.

Entries own their slots. Reuse copies the K/V rows into the new request's own slots (the real radix
cache shares them; what attention reads is the same).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from k26ctl.lab.server.kv_pool import TokenToKVPool


@dataclass
class _Entry:
    tokens: list[int]
    locs: torch.Tensor
    last_used: int


def _common_prefix(a: list[int], b: list[int], limit: int) -> int:
    n = min(len(a), len(b), limit)
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class PrefixCache:
    def __init__(self, pool: TokenToKVPool, max_tokens: int) -> None:
        self.pool = pool
        self.max_tokens = max_tokens
        self._entries: list[_Entry] = []
        self._clock = 0
        self.hits = 0  # tokens served from the cache since the last flush

    @property
    def cached_tokens(self) -> int:
        return sum(len(e.tokens) for e in self._entries)

    def match(self, input_ids: list[int]) -> tuple[int, torch.Tensor | None]:
        """(length, slots) of the longest cached prefix of `input_ids`, leaving its last token out."""
        best, best_entry = 0, None
        for entry in self._entries:
            n = _common_prefix(entry.tokens, input_ids, len(input_ids) - 1)
            if n > best:
                best, best_entry = n, entry
        if best_entry is None:
            return 0, None
        self._clock += 1
        best_entry.last_used = self._clock
        self.hits += best
        return best, best_entry.locs[:best]

    def copy_into(self, src: torch.Tensor, dst: torch.Tensor) -> None:
        for k, v in zip(self.pool.k_buffer, self.pool.v_buffer, strict=True):
            k[dst] = k[src]
            v[dst] = v[src]

    def insert(self, tokens: list[int], locs: torch.Tensor) -> None:
        """Take ownership of `locs` (the KV of `tokens`); a sequence already covered is not kept twice."""
        if not tokens or self.max_tokens <= 0:
            self.pool.free(locs)
            return
        for entry in self._entries:
            if _common_prefix(entry.tokens, tokens, len(tokens)) == len(tokens):
                self.pool.free(locs)  # an entry already holds this sequence (or a longer one)
                return
        covered = [
            e for e in self._entries if _common_prefix(e.tokens, tokens, len(e.tokens)) == len(e.tokens)
        ]
        for entry in covered:
            self._drop(entry)
        self._clock += 1
        self._entries.append(_Entry(list(tokens), locs, self._clock))
        while self.cached_tokens > self.max_tokens and len(self._entries) > 1:
            self._drop(min(self._entries, key=lambda e: e.last_used))

    def evict(self, need: int) -> None:
        """Free least recently used entries until the pool has `need` free slots (or nothing is left)."""
        while self.pool.available() < need and self._entries:
            self._drop(min(self._entries, key=lambda e: e.last_used))

    def flush(self) -> None:
        while self._entries:
            self._drop(self._entries[-1])
        self.hits = 0

    def _drop(self, entry: _Entry) -> None:
        self._entries.remove(entry)
        self.pool.free(entry.locs)
