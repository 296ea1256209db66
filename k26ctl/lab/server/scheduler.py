"""The lab's scheduler thread: admits requests, runs batched steps, streams tokens, keeps statistics.

Requests arriving while another step runs are admitted together at the next iteration, so
concurrent requests are prefilled and then decoded or verified as one batch.
"""

from __future__ import annotations

import itertools
import queue
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from k26ctl.lab.server.engine import Engine, Req
from k26ctl.lab.server.sampling import Sampling
from k26ctl.lab.server.step_cost import StepPacer
from k26ctl.lab.server.tokenizer import ByteTokenizer

_ids = itertools.count()
BATCH_WINDOW_S = 0.003  # how long an idle scheduler waits for companions of a first request


@dataclass
class GenRequest:
    input_ids: list[int]
    max_new_tokens: int
    stop_token_ids: set[int]
    stop_strings: list[str] = field(default_factory=list)
    rid: str = field(default_factory=lambda: f"{next(_ids):x}{int(time.time() * 1000) % 100000:05d}")
    events: queue.Queue[tuple[str, Any]] = field(default_factory=queue.Queue)
    created: float = field(default_factory=time.monotonic)
    req: Req | None = None
    sent: int = 0
    matched_stop: str | int | None = None
    top_logprobs_num: int = 0  # return_logprob: the best log-probabilities kept per output token
    return_logprob: bool = False
    logprob_start_len: int = -1  # >= 0: the prompt's log-probabilities from there on
    sampling: Sampling | None = None  # temperature > 0


@dataclass
class Totals:
    requests: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0  # prompt tokens the prefix cache served (not computed)
    generation_tokens: int = 0
    verify_calls: int = 0  # per request verify passes
    verify_tokens: int = 0  # tokens committed by those passes
    last_gen_throughput: float = 0.0
    running: int = 0
    queued: int = 0
    # SGLang's lifetime speculative totals: rolled up only when a decode-log line is written, reset by
    # a cache flush; no average until a roll-up counted a verify pass (the key is then absent)
    spec_accept_tokens: int = 0
    spec_forward_ct: int = 0

    @property
    def avg_accept_length(self) -> float:
        return self.verify_tokens / self.verify_calls if self.verify_calls else 0.0

    @property
    def lifetime_accept_length(self) -> float | None:
        return self.spec_accept_tokens / self.spec_forward_ct if self.spec_forward_ct else None


@dataclass
class FlushRequest:
    done: threading.Event = field(default_factory=threading.Event)
    flushed: bool = False


class Scheduler(threading.Thread):
    def __init__(
        self,
        engine: Engine,
        max_running: int,
        decode_log_interval: int,
        log: Callable[[str], None],
        crash_on_first_request: bool = False,
        pacer: StepPacer | None = None,
    ) -> None:
        super().__init__(name="scheduler", daemon=True)
        self.engine = engine
        self.tokenizer = ByteTokenizer()
        self.max_running = max_running
        self.decode_log_interval = max(1, decode_log_interval)
        self.log = log
        self.inbox: queue.Queue[GenRequest] = queue.Queue()
        self.flushes: queue.Queue[FlushRequest] = queue.Queue()
        self.waiting: list[GenRequest] = []
        self.running: list[GenRequest] = []
        self.totals = Totals()
        self.lock = threading.Lock()
        self.crash_armed = False
        self.pacer = pacer  # the modelled GPU step time (None: the CPU's own time)
        self._crash_on_first_request = crash_on_first_request
        self.dead = False
        self._stop_event = threading.Event()
        self._iterations = 0
        self._interval_start = time.monotonic()
        self._interval_tokens = 0
        self._interval_verify_calls = 0
        self._interval_verify_tokens = 0

    # ---- public -----------------------------------------------------------------------------------

    def submit(self, gen: GenRequest) -> None:
        self.inbox.put(gen)

    def stop(self) -> None:
        self._stop_event.set()

    def flush_cache(self, wait: float = 5.0) -> bool:
        """Flush the prefix cache if no request is running or waiting (SGLang's rule); False otherwise."""
        request = FlushRequest()
        self.flushes.put(request)
        if not request.done.wait(wait):
            return False
        return request.flushed

    def arm_crash(self) -> None:
        self.crash_armed = self._crash_on_first_request

    # ---- loop -------------------------------------------------------------------------------------

    def run(self) -> None:
        try:
            while not self._stop_event.is_set():
                self._iterate()
        except Exception:
            self.dead = True
            self.log("Scheduler hit an exception: " + traceback.format_exc().rstrip())

    def _collect(self) -> None:
        idle = not self.running and not self.waiting
        try:
            first = self.inbox.get(timeout=0.2) if idle else self.inbox.get_nowait()
        except queue.Empty:
            return
        self.waiting.append(first)
        deadline = time.monotonic() + (BATCH_WINDOW_S if idle else 0.0)
        while True:
            try:
                self.waiting.append(self.inbox.get(timeout=max(0.0, deadline - time.monotonic())))
            except queue.Empty:
                break

    def _serve_flushes(self) -> None:
        while True:
            try:
                request = self.flushes.get_nowait()
            except queue.Empty:
                return
            idle = not self.running and not self.waiting and self.inbox.empty()
            if idle:
                self.engine.flush_cache()
                with self.lock:
                    self.totals.spec_accept_tokens = 0
                    self.totals.spec_forward_ct = 0
                self._interval_verify_calls = 0
                self._interval_verify_tokens = 0
                self.log("Cache flushed successfully!")
            else:
                self.log(
                    "Cache not flushed because there are pending requests. "
                    f"#queue-req: {len(self.waiting) + self.inbox.qsize()}, #running-req: {len(self.running)}"
                )
            request.flushed = idle
            request.done.set()

    def _iterate(self) -> None:
        self._serve_flushes()
        if self.pacer is not None and not self.running:
            self.pacer.idle()
        self._collect()
        if self.waiting and self.crash_armed:
            self._run_batch_with_fault()
        admitted: list[GenRequest] = []
        for gen in list(self.waiting):
            if len(self.running) + len(admitted) >= self.max_running:
                break
            req = Req(gen.rid, gen.input_ids, gen.max_new_tokens, gen.stop_token_ids)
            req.logprobs = gen.return_logprob
            req.top_logprobs_num = gen.top_logprobs_num
            req.logprob_start_len = gen.logprob_start_len
            req.sampling = gen.sampling
            if not self.engine.can_admit(req):
                if not self.running and not admitted:
                    self.waiting.remove(gen)
                    gen.events.put(("error", "request does not fit in the KV cache"))
                    continue
                break
            gen.req = req
            admitted.append(gen)
            self.waiting.remove(gen)
        if admitted:
            began = time.monotonic()
            prefilled = self.engine.prefill([g.req for g in admitted if g.req is not None])
            if self.pacer is not None:
                self.pacer.hold(began, "prefill", prefilled.batch_size, prefilled.rows)
            with self.lock:
                self.totals.requests += len(admitted)
                self.totals.prompt_tokens += sum(len(g.input_ids) for g in admitted)
                self.totals.cached_tokens += sum(g.req.cached_tokens for g in admitted if g.req is not None)
                self.totals.generation_tokens += len(admitted)
            self.running.extend(admitted)
            self._emit()
        if self.running:
            reqs = [g.req for g in self.running if g.req is not None]
            began = time.monotonic()
            stats = self.engine.step(reqs)
            if self.pacer is not None:
                width = self.engine.spec.verify_width if stats.mode == "verify" else 1
                self.pacer.hold(began, stats.mode, stats.batch_size, stats.batch_size * width)
            self._iterations += 1
            with self.lock:
                self.totals.generation_tokens += stats.new_tokens
                if stats.mode == "verify":
                    self.totals.verify_calls += stats.batch_size
                    self.totals.verify_tokens += stats.new_tokens
            self._interval_tokens += stats.new_tokens
            if stats.mode == "verify":
                self._interval_verify_calls += stats.batch_size
                self._interval_verify_tokens += stats.new_tokens
            batch_size = len(self.running)
            self._emit()
            if self._iterations % self.decode_log_interval == 0:
                self._log_decode(batch_size)
        with self.lock:
            self.totals.running = len(self.running)
            self.totals.queued = len(self.waiting) + self.inbox.qsize()

    def _run_batch_with_fault(self) -> None:
        raise RuntimeError(
            "lab fault K26LAB_FAULT=scheduler-crash: scheduler failed while scheduling a batch"
        )

    def _emit(self) -> None:
        for gen in list(self.running):
            req = gen.req
            assert req is not None
            self._apply_stop_strings(gen)
            new = req.output_ids[gen.sent :]
            if new:
                gen.sent = len(req.output_ids)
                gen.events.put(("delta", list(new)))
            if req.finished:
                self.engine.release(req)
                self.running.remove(gen)
                gen.events.put(("done", req))

    def _apply_stop_strings(self, gen: GenRequest) -> None:
        req = gen.req
        if not gen.stop_strings or req is None:
            if req is not None and req.finished_reason and req.finished_reason.get("type") == "stop":
                gen.matched_stop = req.finished_reason.get("matched")
            return
        text = self.tokenizer.decode(req.output_ids)
        for stop in gen.stop_strings:
            at = text.find(stop)
            if at == -1:
                continue
            # keep the tokens that decode to the text before the stop string
            kept = 0
            while kept < len(req.output_ids) and len(self.tokenizer.decode(req.output_ids[: kept + 1])) <= at:
                kept += 1
            del req.output_ids[max(kept, gen.sent) :]
            req.finished_reason = {"type": "stop", "matched": stop}
            gen.matched_stop = stop
            return
        if req.finished_reason and req.finished_reason.get("type") == "stop":
            gen.matched_stop = req.finished_reason.get("matched")

    def _log_decode(self, batch_size: int) -> None:
        now = time.monotonic()
        elapsed = max(now - self._interval_start, 1e-9)
        throughput = self._interval_tokens / elapsed
        pool = self.engine.token_to_kv_pool
        parts = [
            f"Decode batch, #running-req: {batch_size}",
            f"#token: {pool.used()}",
            f"token usage: {pool.used() / pool.size:.2f}",
        ]
        if self._interval_verify_calls:
            accept_len = self._interval_verify_tokens / self._interval_verify_calls
            steps = max(self.engine.spec.block_size - 1, 1)
            parts += [f"accept len: {accept_len:.2f}", f"accept rate: {(accept_len - 1) / steps:.2f}"]
        parts += [
            "cuda graph: False",
            f"gen throughput (token/s): {throughput:.2f}",
            f"#queue-req: {len(self.waiting) + self.inbox.qsize()}",
        ]
        self.log(", ".join(parts))
        with self.lock:
            self.totals.last_gen_throughput = throughput
            self.totals.spec_accept_tokens += self._interval_verify_tokens
            self.totals.spec_forward_ct += self._interval_verify_calls
        self._interval_start = now
        self._interval_tokens = 0
        self._interval_verify_calls = 0
        self._interval_verify_tokens = 0

    def snapshot(self) -> Totals:
        with self.lock:
            return Totals(**self.totals.__dict__)
