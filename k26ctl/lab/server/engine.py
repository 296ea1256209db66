"""The lab's model runner and speculative workers (plain decode, DFlash chain, DDTree tree).

One `Engine` owns the model, the KV pools, the target model runner (whose TritonAttnBackend comes
from the lab tree) and, for speculative algorithms, the drafter and a draft model runner. `step()`
advances every running request by one forward pass: a batched decode, or one batched target verify
whose custom mask, qo_indptr and mask_indptr are read exactly as SGLang's Triton kernel reads them.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import torch

from k26ctl.lab.server import ddtree
from k26ctl.lab.server.drafter import NGramDrafter
from k26ctl.lab.server.kv_pool import ReqToTokenPool, TokenToKVPool
from k26ctl.lab.server.model import TinyDecoder
from k26ctl.lab.server.numerics import Numerics, ToolArguments
from k26ctl.lab.server.prefix_cache import PrefixCache
from k26ctl.lab.server.sampling import Sampling, sample_walk
from k26ctl.lab.server.tokenizer import ByteTokenizer
from k26ctl.lab.server.tree_loader import LabTree

if TYPE_CHECKING:
    from k26ctl.lab.server.fault_switch import RuntimeFaults


@dataclass
class SpecSettings:
    algorithm: str = "NONE"  # NONE | DFLASH | DDTREE
    block_size: int = 8  # DFlash block size = the backend's speculative_num_draft_tokens
    budget: int | None = None  # DDTree tree budget B (verify width B + 1)
    max_topk: int = ddtree.DEFAULT_MAX_TOPK

    @property
    def verify_width(self) -> int:
        if self.algorithm == "DDTREE":
            assert self.budget is not None
            return self.budget + 1
        return self.block_size


@dataclass
class Req:
    rid: str
    input_ids: list[int]
    max_new_tokens: int
    stop_token_ids: set[int] = field(default_factory=set)
    output_ids: list[int] = field(default_factory=list)
    pool_index: int = -1
    cached_len: int = 0  # tokens whose KV is in the pool; the last output token is not among them
    verify_ct: int = 0
    cached_tokens: int = 0  # prompt tokens whose KV came from the prefix cache
    finished_reason: dict[str, Any] | None = None
    # return_logprob: per output token, its own log-probability and the top_logprobs_num best
    # (SGLang's output_token_logprobs / output_top_logprobs, as (logprob, token id) pairs)
    logprobs: bool = False
    top_logprobs_num: int = 0
    output_token_logprobs: list[tuple[float | None, int]] = field(default_factory=list)
    output_top_logprobs: list[list[tuple[float, int]]] = field(default_factory=list)
    # temperature > 0: sampled (None: greedy through the lab's numerics)
    sampling: Sampling | None = None
    # return_logprob with logprob_start_len >= 0: the prompt's own log-probabilities from that position
    # (SGLang: the first entry is None, each later one the raw log-softmax of the row before it)
    logprob_start_len: int = -1
    input_token_logprobs: list[tuple[float | None, int]] = field(default_factory=list)
    input_top_logprobs: list[list[tuple[float, int]] | None] = field(default_factory=list)

    def keep_logprobs(self, logits_row: torch.Tensor, token: int) -> None:
        """Record the log-probabilities of the row that chose `token` (the next output token): the
        temperature-scaled log-softmax for a sampled request, as SGLang's sampler reports it."""
        if not self.logprobs:
            return
        if self.sampling is not None:
            logp = self.sampling.scaled_logprobs(logits_row)
        else:
            logp = torch.log_softmax(logits_row.float(), dim=-1)
        value = float(logp[token])
        # NaN and infinities go out as null, as SGLang's orjson responses write them
        self.output_token_logprobs.append((value if math.isfinite(value) else None, int(token)))
        if self.top_logprobs_num > 0:
            top = logp.topk(min(self.top_logprobs_num, logp.numel()))
            self.output_top_logprobs.append(
                [(float(v), int(i)) for v, i in zip(top.values.tolist(), top.indices.tolist(), strict=True)]
            )

    @property
    def finished(self) -> bool:
        return self.finished_reason is not None

    def all_ids(self) -> list[int]:
        return self.input_ids + self.output_ids

    def keep_input_logprobs(self, rows: torch.Tensor, first_position: int) -> None:
        """The prompt's log-probabilities from `logprob_start_len` on; `rows[j]` is the extend pass's
        logits row of position `first_position + j` (the row that predicts the token after it)."""
        start = self.logprob_start_len
        if not self.logprobs or start < 0 or start >= len(self.input_ids):
            return
        logp = torch.log_softmax(rows.float(), dim=-1)
        self.input_token_logprobs = [(None, self.input_ids[start])]
        self.input_top_logprobs = [None]
        for position in range(start + 1, len(self.input_ids)):
            row = logp[position - 1 - first_position]
            token = self.input_ids[position]
            value = float(row[token])
            self.input_token_logprobs.append((value if math.isfinite(value) else None, token))
            if self.top_logprobs_num > 0:
                top = row.topk(min(self.top_logprobs_num, row.numel()))
                pairs = zip(top.values.tolist(), top.indices.tolist(), strict=True)
                self.input_top_logprobs.append([(float(v), int(i)) for v, i in pairs])


class LabModelRunner:
    """What the attention backend reads from SGLang's ModelRunner."""

    def __init__(self, engine: Engine, server_args: Any, is_draft_worker: bool, backend_cls: type) -> None:
        self.server_args = server_args
        self.is_draft_worker = is_draft_worker
        self.model_config = engine.model.config
        self.device = "cpu"
        self.req_to_token_pool = engine.req_to_token_pool
        self.token_to_kv_pool = engine.token_to_kv_pool
        self.attn_backend = backend_cls(self)


def make_server_args(spec: SpecSettings, **extra: Any) -> SimpleNamespace:
    """The subset of SGLang's ServerArgs the lab tree reads."""
    speculative = spec.algorithm != "NONE"
    values = {
        "speculative_algorithm": spec.algorithm if speculative else None,
        "speculative_num_draft_tokens": spec.block_size if speculative else None,
        "speculative_dflash_block_size": spec.block_size if speculative else None,
        "speculative_ddtree_budget": spec.budget,
        "speculative_num_steps": 1 if speculative else None,
        "speculative_eagle_topk": 1 if speculative else None,
        "attention_backend": "triton",
        "page_size": 1,
    }
    values.update(extra)
    return SimpleNamespace(**values)


@dataclass
class StepStats:
    mode: str  # "decode" | "verify"
    batch_size: int
    new_tokens: int
    rows: int = 0  # prefill: the prompt tokens computed (a cached prefix is not)


def _threshold(server_args: Any, name: str) -> float:
    value = getattr(server_args, name, None)
    return 1.0 if value is None else float(value)


class Engine:
    def __init__(
        self,
        model: TinyDecoder,
        tree: LabTree,
        spec: SpecSettings,
        drafter: NGramDrafter | None = None,
        server_args: Any = None,
        max_running_requests: int = 16,
        context_length: int = 2048,
        kv_tokens: int = 32768,
        numerics: Numerics | None = None,
        prefix_cache_tokens: int | None = None,
    ) -> None:
        if spec.algorithm not in ("NONE", "DFLASH", "DDTREE"):
            raise ValueError(f"unsupported speculative algorithm {spec.algorithm!r}")
        if spec.algorithm != "NONE" and drafter is None:
            raise ValueError(f"{spec.algorithm} needs a drafter")
        self.model = model
        self.tree = tree
        self.spec = spec
        self.drafter = drafter
        self.tokenizer = ByteTokenizer()
        self._tool_arguments = ToolArguments(self.tokenizer.encode)
        self.context_length = context_length
        cfg = model.config
        self.req_to_token_pool = ReqToTokenPool(max_running_requests, context_length + spec.verify_width + 8)
        self.token_to_kv_pool = TokenToKVPool(
            kv_tokens, cfg.num_hidden_layers, cfg.num_key_value_heads, cfg.head_dim
        )
        self.numerics = numerics if numerics is not None else Numerics()
        self.prefix_cache = PrefixCache(
            self.token_to_kv_pool, kv_tokens // 2 if prefix_cache_tokens is None else prefix_cache_tokens
        )
        self.server_args = server_args if server_args is not None else make_server_args(spec)
        backend_cls = tree.backend.TritonAttnBackend
        self.target_runner = LabModelRunner(self, self.server_args, False, backend_cls)
        self.draft_runner = (
            LabModelRunner(self, self.server_args, True, backend_cls) if spec.algorithm != "NONE" else None
        )
        fbi = tree.forward_batch_info
        self._ForwardBatch = fbi.ForwardBatch
        self._ForwardMode = fbi.ForwardMode
        self._SpecVerifyInfo = fbi.SpecVerifyInfo
        self._started_numerics = self.numerics
        self._started_width = self.target_runner.attn_backend.num_draft_tokens
        self._pending_faults: RuntimeFaults | None = None
        # --speculative-accept-threshold-single / -acc: below 1.0 sampled verification accepts more
        self.accept_thresholds = (
            _threshold(self.server_args, "speculative_accept_threshold_single"),
            _threshold(self.server_args, "speculative_accept_threshold_acc"),
        )

    # ---- the lab-only runtime fault switch (lab/server/fault_switch.py) ---------------------------

    def request_faults(self, faults: RuntimeFaults) -> None:
        """Take `faults` at the start of the next step (a step never sees half a change)."""
        self._pending_faults = faults

    def _apply_pending_faults(self) -> None:
        faults, self._pending_faults = self._pending_faults, None
        if faults is None:
            return
        fault = faults.verify_fault or self._started_numerics.verify_fault
        self.numerics = dataclasses.replace(self._started_numerics, verify_fault=fault)
        block = getattr(self.server_args, "speculative_num_draft_tokens", None)
        width = block if faults.mask_bug and block else self._started_width
        self.target_runner.attn_backend.num_draft_tokens = width

    # ---- sizes ------------------------------------------------------------------------------------

    @property
    def target_backend_width(self) -> int | None:
        return self.target_runner.attn_backend.num_draft_tokens

    @property
    def draft_backend_width(self) -> int | None:
        return self.draft_runner.attn_backend.num_draft_tokens if self.draft_runner else None

    def can_admit(self, req: Req) -> bool:
        need = len(req.input_ids) + req.max_new_tokens + self.spec.verify_width
        if self.req_to_token_pool.available() == 0:
            return False
        self.prefix_cache.evict(need)
        return self.token_to_kv_pool.available() >= need

    def _alloc(self, n: int) -> torch.Tensor | None:
        self.prefix_cache.evict(n)
        return self.token_to_kv_pool.alloc(n)

    # ---- request lifecycle ------------------------------------------------------------------------

    def _finish_if_done(self, req: Req) -> None:
        if req.finished:
            return
        for i, tok in enumerate(req.output_ids):
            if tok in req.stop_token_ids:
                del req.output_ids[i + 1 :]
                req.finished_reason = {"type": "stop", "matched": tok}
                return
        if len(req.output_ids) >= req.max_new_tokens:
            del req.output_ids[req.max_new_tokens :]
            req.finished_reason = {"type": "length", "length": req.max_new_tokens}
        elif len(req.all_ids()) + self.spec.verify_width >= self.context_length:
            req.finished_reason = {"type": "length", "length": len(req.output_ids)}

    def release(self, req: Req) -> None:
        """Hand the request's KV to the prefix cache (the part matching its token ids) and free the rest."""
        if req.pool_index >= 0:
            locs = self.req_to_token_pool.req_to_token[req.pool_index, : req.cached_len].clone()
            keep = min(req.cached_len, len(req.all_ids()))
            self.prefix_cache.insert(req.all_ids()[:keep], locs[:keep])
            self.token_to_kv_pool.free(locs[keep:])
            self.req_to_token_pool.free(req.pool_index)
            req.pool_index = -1

    def flush_cache(self) -> None:
        """Drop every cached prefix (the caller makes sure no request is running)."""
        self.prefix_cache.flush()

    # ---- forward passes ---------------------------------------------------------------------------

    def prefill(self, reqs: list[Req]) -> StepStats:
        """One batched extend over the prompts (less any cached prefix); each request gets its first
        output token from this plain pass."""
        locs_per_req = []
        prefix_lens = []
        for req in reqs:
            index = self.req_to_token_pool.alloc()
            locs = self._alloc(len(req.input_ids))
            if index is None or locs is None:
                raise RuntimeError("KV pool exhausted at prefill")
            req.pool_index = index
            cached, cached_locs = self.prefix_cache.match(req.input_ids)
            if req.logprobs and req.logprob_start_len >= 0 and cached > req.logprob_start_len:
                # as SGLang: the prompt's log-probabilities are computed, never taken from the cache
                cached = req.logprob_start_len
                cached_locs = cached_locs[:cached] if cached_locs is not None and cached else None
            req.cached_tokens = cached
            if cached_locs is not None:
                self.prefix_cache.copy_into(cached_locs, locs[:cached])
            self.req_to_token_pool.req_to_token[index, : len(req.input_ids)] = locs
            locs_per_req.append(locs[cached:])
            prefix_lens.append(cached)
        extend = [len(r.input_ids) - p for r, p in zip(reqs, prefix_lens, strict=True)]
        lens = torch.tensor(extend, dtype=torch.int64)
        ids = [t for r, p in zip(reqs, prefix_lens, strict=True) for t in r.input_ids[p:]]
        positions = [
            pos for r, p in zip(reqs, prefix_lens, strict=True) for pos in range(p, len(r.input_ids))
        ]
        batch = self._ForwardBatch(
            forward_mode=self._ForwardMode.EXTEND,
            batch_size=len(reqs),
            input_ids=torch.tensor(ids, dtype=torch.int64),
            positions=torch.tensor(positions, dtype=torch.int64),
            req_pool_indices=torch.tensor([r.pool_index for r in reqs], dtype=torch.int64),
            seq_lens=torch.tensor([len(r.input_ids) for r in reqs], dtype=torch.int64),
            out_cache_loc=torch.cat(locs_per_req),
            extend_prefix_lens=torch.tensor(prefix_lens, dtype=torch.int64),
            extend_seq_lens=lens,
        )
        logits = self.model.forward_batch(batch, self.target_runner.attn_backend)
        last_rows = (torch.cumsum(lens, 0) - 1).tolist()
        next_ids = self.numerics.greedy(
            logits[last_rows],
            ("extend", len(reqs), len(ids)),
            [positions[i] for i in last_rows],
            [ids[i] for i in last_rows],
        )
        first_rows = (torch.cumsum(lens, 0) - lens).tolist()
        for req, prefix, first in zip(reqs, prefix_lens, first_rows, strict=True):
            req.keep_input_logprobs(logits[first : first + len(req.input_ids) - prefix], prefix)
        next_ids = [
            req.sampling.draw(req.sampling.probs(logits[row])) if req.sampling is not None else tok
            for req, tok, row in zip(reqs, next_ids, last_rows, strict=True)
        ]
        for req, tok, row in zip(reqs, next_ids, last_rows, strict=True):
            req.cached_len = len(req.input_ids)
            req.keep_logprobs(logits[row], int(tok))
            req.output_ids.append(int(tok))
            self._finish_if_done(req)
        return StepStats("prefill", len(reqs), len(reqs), rows=len(ids))

    def step(self, reqs: list[Req]) -> StepStats:
        if self._pending_faults is not None:
            self._apply_pending_faults()
        if self.spec.algorithm == "NONE":
            return self.decode(reqs)
        return self.verify(reqs)

    def decode(self, reqs: list[Req]) -> StepStats:
        locs = self._alloc(len(reqs))
        if locs is None:
            raise RuntimeError("KV pool exhausted at decode")
        for req, loc in zip(reqs, locs.tolist(), strict=True):
            self.req_to_token_pool.req_to_token[req.pool_index, req.cached_len] = loc
        batch = self._ForwardBatch(
            forward_mode=self._ForwardMode.DECODE,
            batch_size=len(reqs),
            input_ids=torch.tensor([r.output_ids[-1] for r in reqs], dtype=torch.int64),
            positions=torch.tensor([r.cached_len for r in reqs], dtype=torch.int64),
            req_pool_indices=torch.tensor([r.pool_index for r in reqs], dtype=torch.int64),
            seq_lens=torch.tensor([r.cached_len + 1 for r in reqs], dtype=torch.int64),
            out_cache_loc=locs,
        )
        logits = self.model.forward_batch(batch, self.target_runner.attn_backend)
        choices = self.numerics.greedy(
            logits, ("decode", len(reqs)), [r.cached_len for r in reqs], [r.output_ids[-1] for r in reqs]
        )
        choices = [
            req.sampling.draw(req.sampling.probs(logits[row])) if req.sampling is not None else tok
            for row, (req, tok) in enumerate(zip(reqs, choices, strict=True))
        ]
        for row, (req, tok) in enumerate(zip(reqs, choices, strict=True)):
            req.cached_len += 1
            req.keep_logprobs(logits[row], int(tok))
            req.output_ids.append(int(tok))
            self._finish_if_done(req)
        return StepStats("decode", len(reqs), len(reqs))

    def draft_tree(self, req: Req) -> ddtree.DraftTree:
        assert self.drafter is not None
        depth_limit = self.spec.block_size - 1
        log_q = self.drafter.draft(req.all_ids(), depth_limit)
        if self.spec.algorithm == "DFLASH":
            return ddtree.build_tree(log_q, depth_limit, 1)
        assert self.spec.budget is not None
        return ddtree.build_tree(log_q, self.spec.budget, self.spec.max_topk)

    def verify(self, reqs: list[Req]) -> StepStats:
        width = self.spec.verify_width
        trees = [self.draft_tree(req) for req in reqs]
        locs = self._alloc(width * len(reqs))
        if locs is None:
            raise RuntimeError("KV pool exhausted at verify")
        ids: list[int] = []
        positions: list[int] = []
        masks = []
        for req, tree in zip(reqs, trees, strict=True):
            tokens, depths = ddtree.verify_rows(tree, req.output_ids[-1], width)
            ids.extend(tokens)
            positions.extend(req.cached_len + d for d in depths)
            tree_mask = ddtree.ancestors_mask(tree, width)
            masks.append(ddtree.flat_custom_mask(tree_mask, req.cached_len, rows=tree.num_nodes + 1))
        batch = self._ForwardBatch(
            forward_mode=self._ForwardMode.TARGET_VERIFY,
            batch_size=len(reqs),
            input_ids=torch.tensor(ids, dtype=torch.int64),
            positions=torch.tensor(positions, dtype=torch.int64),
            req_pool_indices=torch.tensor([r.pool_index for r in reqs], dtype=torch.int64),
            seq_lens=torch.tensor([r.cached_len for r in reqs], dtype=torch.int64),
            out_cache_loc=locs,
            spec_info=self._SpecVerifyInfo(custom_mask=torch.cat(masks), draft_token_num=width),
        )
        logits = self.model.forward_batch(batch, self.target_runner.attn_backend)
        flat = self.numerics.greedy(logits, ("verify", len(reqs), width), positions, ids)
        choices = [flat[r * width : (r + 1) * width] for r in range(len(reqs))]
        new_tokens = 0
        for r, (req, tree) in enumerate(zip(reqs, trees, strict=True)):
            if req.sampling is not None:
                accepted, bonus = sample_walk(
                    ddtree.children_rows(tree),
                    logits[r * width : (r + 1) * width],
                    req.sampling,
                    self.accept_thresholds[0],
                    self.accept_thresholds[1],
                )
            else:
                accepted, bonus = ddtree.accept_walk(tree, choices[r])
            if r == 1 and self.numerics.verify_fault == "second-request":
                bonus_row = accepted[-1] if accepted else 0
                wrong = self.numerics.faulty_bonus(logits[r * width + bonus_row])
                bonus = bonus if wrong is None else wrong
            req_locs = locs[r * width : (r + 1) * width]
            keep_rows = [0, *accepted]
            kept = req_locs[keep_rows]
            dropped = torch.ones(width, dtype=torch.bool)
            dropped[keep_rows] = False
            self.token_to_kv_pool.free(req_locs[dropped])
            self.req_to_token_pool.req_to_token[
                req.pool_index, req.cached_len : req.cached_len + len(kept)
            ] = kept
            req.cached_len += len(kept)
            committed = [tree.tokens[row - 1] for row in accepted] + [bonus]
            if self.numerics.verify_fault == "tool-arguments":
                committed = self._tool_argument_fault(req.output_ids, committed)
            for row, token in zip(keep_rows, committed, strict=True):  # row `row` chose the next token
                req.keep_logprobs(logits[r * width + row], token)
            req.output_ids.extend(committed)
            req.verify_ct += 1
            new_tokens += len(committed)
            self._finish_if_done(req)
        return StepStats("verify", len(reqs), new_tokens)

    def _tool_argument_fault(self, before: list[int], committed: list[int]) -> list[int]:
        """The tool-argument fault: at most one accepted draft token (never the bonus, whose KV the next
        pass writes from its id) committed as the wrong id; its KV row stays the right token's."""
        spans = self._tool_arguments
        for i, token in enumerate(committed[:-1]):
            if spans.corrupt(before + committed[:i], token):
                return [*committed[:i], spans.wrong_token, *committed[i + 1 :]]
        return committed

    # ---- convenience for tests and benchmarks -----------------------------------------------------

    def generate(
        self, prompts: list[list[int]], max_new_tokens: int, stop_token_ids: set[int] | None = None
    ) -> list[Req]:
        """Run `prompts` to completion as one batch (greedy)."""
        reqs = [
            Req(
                rid=str(i),
                input_ids=list(p),
                max_new_tokens=max_new_tokens,
                stop_token_ids=set(stop_token_ids or ()),
            )
            for i, p in enumerate(prompts)
        ]
        self.prefill(reqs)
        running = [r for r in reqs if not r.finished]
        while running:
            self.step(running)
            running = [r for r in running if not r.finished]
        for req in reqs:
            self.release(req)
        return reqs
