"""HTTP surface of the lab server with SGLang's paths and JSON shapes (stdlib http.server).

/health and /health_generate (503 until ready, then a 1-token generation answered on a whole second
after the request, at least 1 s, as SGLang's; /health answers at once with
SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION=false), /v1/models,
/v1/completions and /v1/chat/completions (also as SSE streams), native /generate (text or input_ids,
output_ids, return_prompt_token_ids), /v1/tokenize (/tokenize), /server_info (/get_server_info),
/metrics (with --enable-metrics), /flush_cache (400 while requests run or wait, as in SGLang).
"""

from __future__ import annotations

import functools
import json
import math
import os
import queue
import threading
import time
import urllib.parse
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import torch

from k26ctl.lab.server.reasoning import split_reasoning
from k26ctl.lab.server.sampling import Sampling
from k26ctl.lab.server.scheduler import GenRequest, Scheduler
from k26ctl.lab.server.server_args import LabServerArgs
from k26ctl.lab.server.tokenizer import ByteTokenizer, render_chat
from k26ctl.lab.server.tool_calls import PARSERS, message_fields

VERSION = "0.5.15"
SPECIAL_TEXT = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|mask|>", "<|reserved_0|>", "<|reserved_1|>")


class ApiError(Exception):
    def __init__(self, status: int, message: str, kind: str = "BadRequestError") -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind


def _env_bool(name: str, default: bool) -> bool:
    """SGLang's EnvBool: true/1/yes/y and false/0/no/n, any case; anything else keeps the default
    here (SGLang refuses to start)."""
    value = os.environ.get(name, "").lower()
    if value in ("true", "1", "yes", "y"):
        return True
    if value in ("false", "0", "no", "n"):
        return False
    return default


class LabState:
    """Everything the handlers share."""

    def __init__(self, args: LabServerArgs, fault: str | None, log: Any) -> None:
        self.args = args
        self.fault = fault
        self.log = log
        self.tokenizer = ByteTokenizer()
        self.scheduler: Scheduler | None = None
        self.ready = threading.Event()
        self.stopping = threading.Event()
        # Set on SIGTERM, as SGLang's `gracefully_exit`: /health answers 503 while the requests already
        # taken finish; new requests are still served (SGLang does not refuse them either).
        self.draining = threading.Event()
        self._inflight: set[int] = set()  # requests taken over HTTP and not yet answered
        self._inflight_lock = threading.Lock()
        self.lab_info: dict[str, Any] = {}
        self.health_timeout = float(os.environ.get("K26LAB_HEALTH_TIMEOUT", "20"))
        self.health_generates = _env_bool("SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION", True)

    def output_text(self, ids: list[int]) -> str:
        text = self.tokenizer.decode(ids)
        for special in SPECIAL_TEXT:
            text = text.replace(special, "")
        return text

    def submit(
        self,
        input_ids: list[int],
        params: dict[str, Any],
        top_logprobs: int | None = None,
        logprob_start_len: int = -1,
    ) -> GenRequest:
        """Queue one request; `top_logprobs` not None: return_logprob with that many best per token;
        `logprob_start_len` >= 0 adds the prompt's own log-probabilities from that position."""
        if self.scheduler is None or not self.ready.is_set():
            raise ApiError(503, "the server is not ready", "ServiceUnavailableError")
        max_new = params.get("max_new_tokens")
        max_new = 128 if max_new is None else int(max_new)
        if max_new < 0:
            raise ApiError(400, "max_new_tokens must be >= 0")
        if not input_ids:
            raise ApiError(400, "the input is empty")
        if len(input_ids) >= self.args.context_length:
            limit = self.args.context_length
            raise ApiError(
                400, f"the input ({len(input_ids)} tokens) is longer than the context length ({limit})"
            )
        max_new = min(max_new, self.args.context_length - len(input_ids))
        if any(not isinstance(t, int) or t < 0 or t >= self.tokenizer.vocab_size for t in input_ids):
            raise ApiError(400, "input_ids out of vocabulary")
        stop_ids: set[int] = set()
        if not params.get("ignore_eos"):
            stop_ids = {self.tokenizer.eos_id, self.tokenizer.im_end_id}
        stop_ids |= set(params.get("stop_token_ids") or [])
        stop = params.get("stop") or []
        if isinstance(stop, str):
            stop = [stop]
        gen = GenRequest(list(input_ids), max(max_new, 1), stop_ids, list(stop))
        gen.return_logprob = top_logprobs is not None
        gen.top_logprobs_num = max(0, top_logprobs or 0)
        gen.logprob_start_len = logprob_start_len
        gen.sampling = sampling_from(params)
        with self._inflight_lock:
            self._inflight.add(id(gen))
        self.scheduler.submit(gen)
        return gen

    def inflight(self) -> int:
        with self._inflight_lock:
            return len(self._inflight)

    def _answered(self, gen: GenRequest) -> None:
        with self._inflight_lock:
            self._inflight.discard(id(gen))

    def wait_events(self, gen: GenRequest, timeout: float | None = None) -> Iterator[tuple[str, Any]]:
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            while True:
                if self.stopping.is_set():
                    raise ApiError(503, "the server is shutting down", "ServiceUnavailableError")
                wait = 0.5 if deadline is None else min(0.5, deadline - time.monotonic())
                if wait <= 0:
                    raise TimeoutError
                try:
                    kind, payload = gen.events.get(timeout=wait)
                except queue.Empty:
                    continue
                yield kind, payload
                if kind in ("done", "error"):
                    return
        finally:
            self._answered(gen)

    def hang_if_faulty(self) -> None:
        if self.fault == "hang":
            self.stopping.wait()
            raise ApiError(503, "the server is shutting down", "ServiceUnavailableError")

    def meta_info(self, gen: GenRequest, finished: bool) -> dict[str, Any]:
        req = gen.req
        completion = len(req.output_ids) if req else 0
        verify_ct = req.verify_ct if req else 0
        reason = req.finished_reason if (req and finished) else None
        if reason and gen.matched_stop is not None:
            reason = {**reason, "matched": gen.matched_stop}
        meta: dict[str, Any] = {
            "id": gen.rid,
            "finish_reason": reason,
            "prompt_tokens": len(gen.input_ids),
            "completion_tokens": completion,
            "cached_tokens": req.cached_tokens if req else 0,
            "e2e_latency": round(time.monotonic() - gen.created, 6),
        }
        if self.args.speculative_algorithm and verify_ct > 0:
            # as SGLang's tokenizer manager: the spec fields only once something was verified
            meta["spec_verify_ct"] = verify_ct
            meta["spec_accept_length"] = round(completion / verify_ct, 4)
        if gen.return_logprob:
            meta.update(_logprob_fields(gen))
        return meta


def _top_logprobs(body: dict[str, Any]) -> int | None:
    """/generate's return_logprob and top_logprobs_num (top-level fields, as in GenerateReqInput)."""
    if not body.get("return_logprob"):
        return None
    top = body.get("top_logprobs_num") or 0
    if isinstance(top, bool) or not isinstance(top, int) or top < 0:
        raise ApiError(400, f"top_logprobs_num must be a non-negative integer, got {top!r}")
    return top


def sampling_from(params: dict[str, Any]) -> Sampling | None:
    """A sampled request's sampler (None: greedy). The lab draws from the request's `sampling_seed` when
    given, as SGLang does under --enable-deterministic-inference, so lab runs repeat."""
    temperature = params.get("temperature")
    if temperature is None:
        return None  # the lab's default is greedy (SGLang's is the model's generation config)
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or temperature < 0:
        raise ApiError(400, f"temperature must be a non-negative number, got {temperature!r}")
    if temperature < 1e-6:  # SGLang treats such a temperature as greedy (top_k 1)
        return None
    top_p = params.get("top_p")
    top_p = 1.0 if top_p is None else float(top_p)
    if not 0.0 < top_p <= 1.0:
        raise ApiError(400, f"top_p must be in (0, 1], got {top_p!r}")
    generator = torch.Generator()
    seed = params.get("sampling_seed")
    generator.manual_seed(int(seed) if isinstance(seed, int) else int.from_bytes(os.urandom(7), "big"))
    return Sampling(float(temperature), top_p, generator)


def _logprob_start_len(body: dict[str, Any]) -> int:
    value = body.get("logprob_start_len", -1)
    if value is None:
        return -1
    if isinstance(value, bool) or not isinstance(value, int):
        raise ApiError(400, f"logprob_start_len must be an integer, got {value!r}")
    return value


def _logprob_fields(gen: GenRequest) -> dict[str, Any]:
    """SGLang 0.5.15's shape (tokenizer_manager.py): (logprob, token id, text or None) triples; with the
    default logprob_start_len -1 the input side is empty (checked against the real 0.5.15 server,
    tests/lab_real/test_stand_in_differential.py); with logprob_start_len s it holds the prompt's
    tokens from s on, the first without a logprob
    (scheduler_components/logprob_result_processor.py: `[None] + input_token_logprobs[:-1]`)."""
    req = gen.req
    if req is not None and req.input_token_logprobs:
        inputs = [[v, i, None] for v, i in req.input_token_logprobs]
    else:
        inputs = []
    fields: dict[str, Any] = {
        "input_token_logprobs": inputs,
        "output_token_logprobs": [[v, i, None] for v, i in (req.output_token_logprobs if req else [])],
    }
    fields["output_token_logprobs_length"] = len(fields["output_token_logprobs"])
    if gen.top_logprobs_num > 0:
        if req is not None and req.input_token_logprobs:
            fields["input_top_logprobs"] = [
                None if top is None else [[v, i, None] for v, i in top] for top in req.input_top_logprobs
            ]
        else:
            fields["input_top_logprobs"] = []
        fields["output_top_logprobs"] = [
            [[v, i, None] for v, i in top] for top in (req.output_top_logprobs if req else [])
        ]
    return fields


def _finish_reason(gen: GenRequest) -> str | None:
    req = gen.req
    if req is None or req.finished_reason is None:
        return None
    return "stop" if req.finished_reason.get("type") == "stop" else "length"


class Handler(BaseHTTPRequestHandler):
    server_version = "k26lab"
    protocol_version = "HTTP/1.1"
    state: LabState  # set on the subclass made by make_server

    # ---- plumbing ---------------------------------------------------------------------------------

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _log_access(self, status: int) -> None:
        host, port = self.client_address[:2]
        self.state.log(f'{host}:{port} - "{self.command} {self.path} HTTP/1.1" {status}')

    def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self._log_access(status)

    def _json(self, status: int, data: Any) -> None:
        self._send(status, json.dumps(data).encode())

    def _error(self, err: ApiError) -> None:
        self._json(
            err.status,
            {"object": "error", "message": err.message, "type": err.kind, "param": None, "code": err.status},
        )

    def _discard_body(self) -> None:
        """Read a body that will not be used, so the next request on the connection starts clean."""
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if 0 <= length <= 1 << 20:
            self.rfile.read(length)
        else:
            self.close_connection = True

    def _body(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return {}
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ApiError(400, f"invalid JSON body: {exc}") from None
        if not isinstance(data, dict):
            raise ApiError(400, "the JSON body must be an object")
        return data

    def _authorized(self) -> bool:
        key = self.state.args.api_key
        if not key or self.path.split("?")[0] in ("/health", "/health_generate", "/metrics"):
            return True
        return self.headers.get("Authorization", "") == f"Bearer {key}"

    def _sse_start(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        self._log_access(200)

    def _sse(self, data: Any) -> None:
        payload = data if isinstance(data, str) else json.dumps(data)
        self.wfile.write(f"data: {payload}\n\n".encode())
        self.wfile.flush()

    # ---- dispatch ---------------------------------------------------------------------------------

    def do_GET(self) -> None:
        self._dispatch(
            {
                "/health": self.health,
                "/health_generate": self.health,
                "/v1/models": self.models,
                "/server_info": self.server_info,
                "/get_server_info": self.server_info,
                "/metrics": self.metrics,
                "/flush_cache": self.flush_cache,
                "/get_model_info": self.model_info,
                "/model_info": self.model_info,
                "/get_load": self.get_load,
            }
        )

    def do_POST(self) -> None:
        self._dispatch(
            {
                "/generate": self.generate,
                "/v1/completions": self.completions,
                "/v1/chat/completions": self.chat_completions,
                "/flush_cache": self.flush_cache,
                "/v1/tokenize": self.tokenize,
                "/tokenize": self.tokenize,
                "/v1/detokenize": self.detokenize,
                "/detokenize": self.detokenize,
            }
        )

    def _dispatch(self, routes: dict[str, Any]) -> None:
        path = self.path.split("?")[0]
        route = routes.get(path)
        if route is None and self.command == "GET" and path.startswith("/v1/models/"):
            name = urllib.parse.unquote(path[len("/v1/models/") :])
            route = functools.partial(self.retrieve_model, name)
        try:
            if route is None:
                self._discard_body()
                raise ApiError(404, f"{self.command} {path}: not found", "NotFoundError")
            if not self._authorized():
                self._discard_body()
                self._json(401, {"error": "Unauthorized"})
                return
            route()
        except ApiError as err:
            self._error(err)
        except (BrokenPipeError, ConnectionResetError):
            pass

    # ---- endpoints --------------------------------------------------------------------------------

    def health(self) -> None:
        st = self.state
        if not st.ready.is_set() or st.scheduler is None or st.draining.is_set():
            self._send(503, b"")
            return
        if self.path.split("?")[0] == "/health" and not st.health_generates:
            self._send(200, b"")
            return
        gen = GenRequest([0], 1, set())
        st.scheduler.submit(gen)
        asked = time.monotonic()
        try:
            for kind, _ in st.wait_events(gen, st.health_timeout):
                if kind == "error":
                    self._send(503, b"")
                    return
        except TimeoutError:
            st.log(f"Health check failed: no answer from the scheduler within {st.health_timeout:g} s")
            self._send(503, b"")
            return
        # SGLang looks for the answer once a second after asking (http_server.py, health_generate):
        # a 200 never comes sooner than 1 s, and only on a whole second after the request.
        seconds = max(1, math.ceil(time.monotonic() - asked))
        time.sleep(max(0.0, asked + seconds - time.monotonic()))
        self._send(200, b"")

    def models(self) -> None:
        args = self.state.args
        self._json(
            200,
            {
                "object": "list",
                "data": [
                    {
                        "id": args.served_model_name,
                        "object": "model",
                        "created": int(time.time()),
                        "owned_by": "sglang",
                        "root": args.served_model_name,
                        "max_model_len": args.context_length,
                    }
                ],
            },
        )

    def get_load(self) -> None:
        """SGLang's `/get_load` shape, one data-parallel rank: requests taken and not yet answered."""
        st = self.state
        totals = st.scheduler.snapshot() if st.scheduler else None
        waiting = totals.queued if totals else 0
        self._json(
            200,
            [
                {
                    "dp_rank": 0,
                    "num_reqs": st.inflight(),
                    "num_waiting_reqs": waiting,
                    "num_tokens": 0,
                    "num_pending_tokens": 0,
                    "ts_tic": time.perf_counter(),
                }
            ],
        )

    def retrieve_model(self, name: str) -> None:
        """GET /v1/models/{model}: the card, or OpenAI's model_not_found error (http_server.py)."""
        args = self.state.args
        if name != args.served_model_name:
            message = f"The model '{name}' does not exist"
            error = {"message": message, "type": "invalid_request_error", "param": "model"}
            self._json(404, {"error": {**error, "code": "model_not_found"}})
            return
        card = {"id": name, "object": "model", "created": int(time.time()), "owned_by": "sglang"}
        self._json(200, {**card, "root": name, "max_model_len": args.context_length})

    def model_info(self) -> None:
        self._json(200, {"model_path": self.state.args.model_path, "is_generation": True})

    def server_info(self) -> None:
        st = self.state
        totals = st.scheduler.snapshot() if st.scheduler else None
        internal: dict[str, Any] = {
            "last_gen_throughput": totals.last_gen_throughput if totals else 0.0,
            "num_running_reqs": totals.running if totals else 0,
        }
        lifetime = totals.lifetime_accept_length if totals else None
        if st.args.speculative_algorithm and lifetime is not None:
            internal["avg_spec_accept_length"] = lifetime
        self._json(
            200, {**st.args.to_json(), "version": VERSION, "internal_states": [internal], "lab": st.lab_info}
        )

    def metrics(self) -> None:
        st = self.state
        if not st.args.enable_metrics:
            raise ApiError(
                404, "metrics are disabled; start the server with --enable-metrics", "NotFoundError"
            )
        t = st.scheduler.snapshot() if st.scheduler else None
        name = st.args.served_model_name
        label = '{model_name="' + name.replace("\\", "\\\\").replace('"', '\\"') + '"}'
        block = max((st.args.speculative_num_draft_tokens or 2) - 1, 1)
        accept = t.avg_accept_length if t else 0.0
        rows = [
            ("sglang:num_running_reqs", "gauge", "Running requests", t.running if t else 0),
            ("sglang:num_queue_reqs", "gauge", "Queued requests", t.queued if t else 0),
            (
                "sglang:gen_throughput",
                "gauge",
                "Generation throughput (token/s)",
                t.last_gen_throughput if t else 0.0,
            ),
            ("sglang:spec_accept_length", "gauge", "Average speculative accept length", accept),
            (
                "sglang:spec_accept_rate",
                "gauge",
                "Speculative accept rate",
                max(accept - 1, 0) / block if accept else 0.0,
            ),
            (
                "sglang:spec_verify_calls_total",
                "counter",
                "Speculative verify passes",
                t.verify_calls if t else 0,
            ),
            ("sglang:prompt_tokens_total", "counter", "Prompt tokens", t.prompt_tokens if t else 0),
            (
                "sglang:generation_tokens_total",
                "counter",
                "Generated tokens",
                t.generation_tokens if t else 0,
            ),
            ("sglang:num_requests_total", "counter", "Finished and running requests", t.requests if t else 0),
        ]
        lines = []
        for metric, kind, help_text, value in rows:
            lines += [
                f"# HELP {metric} {help_text}",
                f"# TYPE {metric} {kind}",
                f"{metric}{label} {float(value)}",
            ]
        # as SGLang reports it without per-source details (observability/metrics_collector.py)
        cached = float(t.cached_tokens if t else 0)
        lines += [
            "# HELP sglang:cached_tokens_total Number of cached prompt tokens by source.",
            "# TYPE sglang:cached_tokens_total counter",
            f'sglang:cached_tokens_total{label[:-1]},cache_source="total"}} {cached}',
        ]
        self._send(200, ("\n".join(lines) + "\n").encode(), "text/plain; version=0.0.4; charset=utf-8")

    def flush_cache(self) -> None:
        """SGLang's rule: flush only when no request is running or waiting, else 400; `?timeout=S`
        keeps trying for S seconds."""
        if self.command == "POST":
            self._body()
        st = self.state
        if st.scheduler is None or not st.ready.is_set():
            raise ApiError(503, "the server is not ready", "ServiceUnavailableError")
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
        try:
            timeout = max(0.0, float((query.get("timeout") or ["0"])[0]))
        except ValueError:
            raise ApiError(400, "timeout must be a number") from None
        deadline = time.monotonic() + timeout
        while True:
            if st.scheduler.flush_cache():
                self._send(
                    200,
                    b"Cache flushed.\nPlease check backend logs for more details. (When there are running "
                    b"or waiting requests, the operation will not be performed.)\n",
                    "text/plain; charset=utf-8",
                )
                return
            if time.monotonic() >= deadline:
                self._send(400, b"Flush cache failed.\n", "text/plain; charset=utf-8")
                return
            time.sleep(0.05)

    def tokenize(self) -> None:
        """POST /v1/tokenize: `messages` (the chat template applied) or `prompt` (text or list of texts)."""
        st = self.state
        body = self._body()
        messages, prompt = body.get("messages"), body.get("prompt")
        if (messages is None) == (prompt is None):
            raise ApiError(400, "Exactly one of 'prompt' or 'messages' must be provided.")
        max_len = st.args.context_length
        if messages is not None:
            if not isinstance(messages, list) or not messages:
                raise ApiError(400, "messages must be a non-empty list")
            kwargs = body.get("chat_template_kwargs") or {}
            thinking = bool(kwargs.get("thinking", kwargs.get("enable_thinking", True)))
            tokens = st.tokenizer.encode(render_chat(messages, thinking=thinking))
            self._json(200, {"tokens": tokens, "count": len(tokens), "max_model_len": max_len})
        elif isinstance(prompt, str):
            tokens = st.tokenizer.encode(prompt)
            self._json(200, {"tokens": tokens, "count": len(tokens), "max_model_len": max_len})
        elif isinstance(prompt, list) and all(isinstance(p, str) for p in prompt):
            lists = [st.tokenizer.encode(p) for p in prompt]
            self._json(200, {"tokens": lists, "count": [len(t) for t in lists], "max_model_len": max_len})
        else:
            raise ApiError(400, f"Invalid prompt type: {type(prompt).__name__}. Expected str or List[str].")

    def detokenize(self) -> None:
        body = self._body()
        tokens = body.get("tokens")
        vocab = self.state.tokenizer.vocab_size
        if not isinstance(tokens, list) or not all(isinstance(t, int) and 0 <= t < vocab for t in tokens):
            raise ApiError(400, "Invalid input: 'tokens' must be a list of integers.")
        self._json(200, {"text": self.state.output_text(tokens)})

    # ---- generation -------------------------------------------------------------------------------

    def _malformed(self) -> None:
        self._send(200, b'{"id": "broken", "choices": [{"text": "The', "application/json")

    def generate(self) -> None:
        st = self.state
        body = self._body()
        params = dict(body.get("sampling_params") or {})
        if "text" in body and body["text"] is not None:
            texts = body["text"]
            batch = [st.tokenizer.encode(t) for t in (texts if isinstance(texts, list) else [texts])]
            single = not isinstance(texts, list)
        elif body.get("input_ids") is not None:
            ids = body["input_ids"]
            single = not (ids and isinstance(ids[0], list))
            batch = [ids] if single else ids
        else:
            raise ApiError(400, "either text or input_ids should be provided")
        st.hang_if_faulty()
        top = _top_logprobs(body)
        start = _logprob_start_len(body)
        gens = [st.submit(ids, params, top, start) for ids in batch]
        if st.fault == "malformed":
            self._malformed()
            return
        if body.get("stream"):
            self._sse_start()
            for gen in gens:
                for kind, _ in st.wait_events(gen):
                    if kind == "error":
                        self._sse({"error": {"message": "generation failed"}})
                        break
                    ids = gen.req.output_ids if gen.req else []
                    self._sse(
                        {
                            "text": st.output_text(ids),
                            "output_ids": list(ids),
                            "meta_info": st.meta_info(gen, kind == "done"),
                        }
                    )
            self._sse("[DONE]")
            return
        results = []
        for gen in gens:
            for kind, payload in st.wait_events(gen):
                if kind == "error":
                    raise ApiError(400, str(payload))
            ids = gen.req.output_ids if gen.req else []
            result = {
                "text": st.output_text(ids),
                "output_ids": list(ids),
                "meta_info": st.meta_info(gen, True),
            }
            if body.get("return_prompt_token_ids"):
                result["prompt_token_ids"] = list(gen.input_ids)
            results.append(result)
        self._json(200, results[0] if single else results)

    def _openai_params(self, body: dict[str, Any]) -> dict[str, Any]:
        max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
        return {
            "max_new_tokens": max_tokens,
            "temperature": body.get("temperature"),
            "top_p": body.get("top_p"),
            "sampling_seed": body.get("seed"),
            "stop": body.get("stop"),
            "stop_token_ids": body.get("stop_token_ids"),
            "ignore_eos": body.get("ignore_eos", False),
        }

    def _usage(self, gen: GenRequest) -> dict[str, int]:
        completion = len(gen.req.output_ids) if gen.req else 0
        return {
            "prompt_tokens": len(gen.input_ids),
            "completion_tokens": completion,
            "total_tokens": len(gen.input_ids) + completion,
        }

    def completions(self) -> None:
        st = self.state
        body = self._body()
        prompt = body.get("prompt")
        if isinstance(prompt, list) and prompt and isinstance(prompt[0], str):
            if len(prompt) != 1:
                raise ApiError(400, "the lab server takes one prompt per request")
            prompt = prompt[0]
        if isinstance(prompt, str):
            ids = st.tokenizer.encode(prompt)
        elif isinstance(prompt, list) and all(isinstance(t, int) for t in prompt):
            ids = list(prompt)
        else:
            raise ApiError(400, "prompt must be a string or a list of token ids")
        params = self._openai_params(body)
        if params["max_new_tokens"] is None:
            params["max_new_tokens"] = 16
        st.hang_if_faulty()
        gen = st.submit(ids, params)
        if st.fault == "malformed":
            self._malformed()
            return
        cid = f"cmpl-{uuid.uuid4().hex}"
        created = int(time.time())
        model = body.get("model") or st.args.served_model_name
        if body.get("stream"):
            self._sse_start()
            sent = ""
            for kind, _ in st.wait_events(gen):
                if kind == "error":
                    break
                text = st.output_text(gen.req.output_ids if gen.req else [])
                delta, sent = text[len(sent) :], text
                finish = _finish_reason(gen) if kind == "done" else None
                if delta or finish:
                    choice = {"index": 0, "text": delta, "logprobs": None, "finish_reason": finish}
                    self._sse(
                        {
                            "id": cid,
                            "object": "text_completion",
                            "created": created,
                            "model": model,
                            "choices": [choice],
                        }
                    )
            if (body.get("stream_options") or {}).get("include_usage"):
                self._sse(
                    {
                        "id": cid,
                        "object": "text_completion",
                        "created": created,
                        "model": model,
                        "choices": [],
                        "usage": self._usage(gen),
                    }
                )
            self._sse("[DONE]")
            return
        text = self._finished_text(gen)
        self._whole_response(gen, cid, "text_completion", created, model, {"text": text})

    def chat_completions(self) -> None:
        st = self.state
        body = self._body()
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ApiError(400, "messages must be a non-empty list")
        kwargs = body.get("chat_template_kwargs") or {}
        thinking = bool(kwargs.get("thinking", kwargs.get("enable_thinking", True)))
        ids = st.tokenizer.encode(render_chat(messages, thinking=thinking))
        params = self._openai_params(body)
        st.hang_if_faulty()
        gen = st.submit(ids, params)
        if st.fault == "malformed":
            self._malformed()
            return
        separate = st.args.reasoning_parser is not None and body.get("separate_reasoning", True)
        cid = f"chatcmpl-{uuid.uuid4().hex}"
        created = int(time.time())
        model = body.get("model") or st.args.served_model_name
        if body.get("stream"):
            self._stream_chat(gen, cid, created, model, separate, body)
            return
        text = self._finished_text(gen)
        reasoning, content = split_reasoning(text) if separate else (None, text)
        finish = _finish_reason(gen)
        tool_calls = None
        tools = body.get("tools")
        if tools and body.get("tool_choice", "auto") != "none" and st.args.tool_call_parser in PARSERS:
            content, tool_calls, finish = message_fields(content, tools, finish)
        message = {
            "role": "assistant",
            "content": content,
            "reasoning_content": reasoning or None,
            "tool_calls": tool_calls,
        }
        self._whole_response(
            gen, cid, "chat.completion", created, model, {"message": message}, finish_reason=finish
        )

    def _finished_text(self, gen: GenRequest) -> str:
        """Wait for the request to finish and return its whole output text."""
        for kind, payload in self.state.wait_events(gen):
            if kind == "error":
                raise ApiError(400, str(payload))
        return self.state.output_text(gen.req.output_ids if gen.req else [])

    def _whole_response(
        self,
        gen: GenRequest,
        cid: str,
        kind: str,
        created: int,
        model: str,
        output: dict[str, Any],
        finish_reason: str | None = None,
    ) -> None:
        """The non-streamed reply: one choice holding `output` (text or message), with usage. A tool
        call's answer finishes with `tool_calls` and no matched stop (serving_chat._process_tool_calls)."""
        finish = finish_reason or _finish_reason(gen)
        choice = {
            "index": 0,
            **output,
            "logprobs": None,
            "finish_reason": finish,
            "matched_stop": None if finish == "tool_calls" else gen.matched_stop,
        }
        self._json(
            200,
            {
                "id": cid,
                "object": kind,
                "created": created,
                "model": model,
                "choices": [choice],
                "usage": self._usage(gen),
            },
        )

    def _stream_chat(
        self, gen: GenRequest, cid: str, created: int, model: str, separate: bool, body: dict[str, Any]
    ) -> None:
        st = self.state
        self._sse_start()

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
            return {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [choice],
            }

        self._sse(chunk({"role": "assistant", "content": ""}))
        sent_reasoning, sent_content = "", ""
        for kind, _ in st.wait_events(gen):
            if kind == "error":
                break
            done = kind == "done"
            text = st.output_text(gen.req.output_ids if gen.req else [])
            reasoning, content = split_reasoning(text, final=done) if separate else ("", text)
            if len(reasoning) > len(sent_reasoning):
                self._sse(chunk({"reasoning_content": reasoning[len(sent_reasoning) :]}))
                sent_reasoning = reasoning
            if len(content) > len(sent_content):
                self._sse(chunk({"content": content[len(sent_content) :]}))
                sent_content = content
            if done:
                self._sse(chunk({}, _finish_reason(gen)))
        if (body.get("stream_options") or {}).get("include_usage"):
            self._sse(
                {
                    "id": cid,
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": model,
                    "choices": [],
                    "usage": self._usage(gen),
                }
            )
        self._sse("[DONE]")


def make_server(state: LabState) -> ThreadingHTTPServer:
    handler = type("LabHandler", (Handler,), {"state": state})
    server = ThreadingHTTPServer((state.args.host, state.args.port), handler)
    server.daemon_threads = True
    return server
