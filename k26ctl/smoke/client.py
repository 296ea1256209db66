"""A small HTTP client for the parts of SGLang's server the smoke suite uses.

/v1/chat/completions for answers (with `reasoning_content` when a reasoning parser is on), native
/generate for per-request speculative statistics (`meta_info.spec_accept_length`, `spec_verify_ct`),
/server_info for the server identity and `avg_spec_accept_length`, /v1/models for the model name;
for the self-consistency probes, token ids: /v1/tokenize (chat messages through the chat template),
/generate with `input_ids` (`output_ids`, `prompt_token_ids`), /v1/detokenize, and /flush_cache.
Every request goes through `k26ctl.httpsafe.BoundedClient` (a total deadline per request and a body
cap after decompression) and every answer is validated against `k26ctl.smoke.responses` before use.
Transport failures and deadlines become `UnreachableError`; HTTP errors, oversized, malformed or
wrongly shaped bodies become `ResponseError`, which the runner records as a failed request.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

import httpx

from k26ctl import httpsafe, jsonsafe
from k26ctl.errors import PermissionDeniedError, UnreachableError
from k26ctl.jsonsafe import JSONRefused
from k26ctl.smoke.responses import (
    ChatCompletion,
    DetokenizeAnswer,
    FinishReason,
    GenerateAnswer,
    MetaInfo,
    ModelList,
    ServerInfo,
    TokenizeAnswer,
    parse_answer,
)
from k26ctl.termsafe import clean


class ResponseError(Exception):
    """The server answered, but not with a usable response (HTTP error status, malformed JSON)."""


@dataclass(frozen=True)
class Completion:
    text: str
    reasoning: str
    finish_reason: str | None
    completion_tokens: int | None
    elapsed: float
    accept_length: float | None = None
    verify_ct: int | None = None
    surrogates_replaced: int = 0  # lone surrogates in the answer's JSON, replaced by U+FFFD
    tool_calls: list[Any] | None = None  # message.tool_calls as the server's tool-call parser sent them

    @property
    def tokens_per_s(self) -> float | None:
        if not self.completion_tokens or self.elapsed <= 0:
            return None
        return self.completion_tokens / self.elapsed


@dataclass(frozen=True)
class TokenCompletion:
    """A /generate answer with its token ids: the prompt as the server tokenized it and the output."""

    completion: Completion
    prompt_ids: list[int]
    output_ids: list[int]
    # per output token, top-1 minus top-2 log-probability (when asked for with top_logprobs >= 2)
    top2_margins: list[float | None] | None = None
    # per output token, its decode log-probability (return_logprob; temperature-scaled when sampled)
    logprobs: list[float | None] | None = None


MAX_BODY = 8 << 20  # a 4096-token answer is well under 100 KB; room for long reasoning and batches


class SGLangClient:
    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        timeout: float = 120.0,
        transport: httpx.BaseTransport | None = None,
        max_body: int = MAX_BODY,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self._sent = 0
        self._sent_lock = threading.Lock()
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpsafe.BoundedClient(
            self.base_url, timeout=timeout, max_body=max_body, headers=headers, transport=transport
        )

    @property
    def requests_sent(self) -> int:
        """HTTP requests made so far (a run's cost, reported by the watcher)."""
        return self._sent

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> SGLangClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- plumbing --------------------------------------------------------------------------------

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """One bounded request; the answer's JSON (depth- and number-limited, strings encodable)."""
        return self._request_decoded(method, path, body).value

    def _request_decoded(
        self, method: str, path: str, body: dict[str, Any] | None = None
    ) -> jsonsafe.Decoded:
        """`_request`, with how many lone surrogates the answer carried (replaced by U+FFFD)."""
        response = self._send(method, path, body)
        if response.status_code >= 400:
            raise ResponseError(
                f"HTTP {response.status_code} from {path}: {clean(response.text.strip(), limit=200)}"
            )
        try:
            return jsonsafe.decode(response.body)
        except JSONRefused as exc:
            raise ResponseError(f"malformed JSON from {path}: {exc}") from None

    def _send(self, method: str, path: str, body: dict[str, Any] | None = None) -> httpsafe.BoundedResponse:
        """One request; transport failures, the deadline and a refused API key raise, an oversized or
        undecodable body is a ResponseError, any other status is returned."""
        shown = f"{self.base_url}{path}"
        with self._sent_lock:
            self._sent += 1
        try:
            response = self._http.request(method, path, json=body)
        except httpsafe.DeadlineExceeded:
            raise UnreachableError(
                f"{shown}: no complete answer within the timeout ({self.timeout:g} s)",
                "the server may be hung or overloaded; check its journal, or raise --timeout",
            ) from None
        except httpsafe.TransportFailure as exc:
            raise UnreachableError(
                f"{shown}: cannot reach the server ({clean(exc, limit=200)})",
                "is the server running and listening there? check `systemctl status` and the journal",
            ) from None
        except (httpsafe.BodyTooLarge, httpsafe.BadEncoding) as exc:
            raise ResponseError(f"{path}: {exc}") from None
        if response.status_code in (401, 403):
            raise PermissionDeniedError(
                f"{shown}: the server refused the API key (HTTP {response.status_code})",
                "set the API key variable named by sglang.api_key_env (or --api-key-env)",
            )
        return response

    def _answer(self, model: Any, what: str, data: Any) -> Any:
        try:
            return parse_answer(model, data)
        except ValueError as exc:
            raise ResponseError(f"unexpected {what} body: {clean(exc, limit=200)}") from None

    # ---- endpoints -------------------------------------------------------------------------------

    def model_names(self) -> list[str]:
        models: ModelList = self._answer(ModelList, "/v1/models", self._request("GET", "/v1/models"))
        return [card.id for card in models.data]

    def server_info(self) -> dict[str, Any] | None:
        """The resolved server arguments and version; None when the endpoint is missing.

        A document of the wrong shape is a ResponseError, like any other malformed answer."""
        for path in ("/server_info", "/get_server_info"):
            try:
                data = self._request("GET", path)
            except ResponseError:
                continue
            if isinstance(data, dict):
                self._answer(ServerInfo, path, data)
                return data
        return None

    def chat(
        self,
        messages: list[dict[str, str]],
        *,
        model: str,
        temperature: float,
        max_tokens: int,
        top_p: float | None = None,
        seed: int | None = None,
        chat_template_kwargs: dict[str, Any] | None = None,
        tools: list[dict[str, Any]] | None = None,
        response_format: dict[str, Any] | None = None,
    ) -> Completion:
        """One chat completion. `tools` go out with tool_choice "auto" (no grammar: a DDTree server
        refuses constrained requests); `response_format` only where the caller knows a grammar runs."""
        body: dict[str, Any] = {
            "model": model,
            "messages": messages,
            "temperature": temperature,
            "max_tokens": max_tokens,
            "stream": False,
        }
        if top_p is not None:
            body["top_p"] = top_p
        if seed is not None:
            body["seed"] = seed
        if chat_template_kwargs:
            body["chat_template_kwargs"] = chat_template_kwargs
        if tools:
            body["tools"], body["tool_choice"] = tools, "auto"
        if response_format is not None:
            body["response_format"] = response_format
        started = time.monotonic()
        decoded = self._request_decoded("POST", "/v1/chat/completions", body)
        elapsed = time.monotonic() - started
        answer: ChatCompletion = self._answer(ChatCompletion, "chat completion", decoded.value)
        choice = answer.choices[0]
        return Completion(
            choice.message.content or "",
            choice.message.reasoning_content or "",
            choice.finish_reason,
            answer.usage.completion_tokens if answer.usage else None,
            elapsed,
            surrogates_replaced=decoded.surrogates_replaced,
            tool_calls=choice.message.tool_calls,
        )

    def generate(
        self,
        text: str,
        *,
        temperature: float,
        max_new_tokens: int,
        top_p: float | None = None,
        seed: int | None = None,
    ) -> Completion:
        params: dict[str, Any] = {"temperature": temperature, "max_new_tokens": max_new_tokens}
        if top_p is not None:
            params["top_p"] = top_p
        if seed is not None:
            params["sampling_seed"] = seed
        started = time.monotonic()
        decoded = self._request_decoded("POST", "/generate", {"text": text, "sampling_params": params})
        elapsed = time.monotonic() - started
        data = decoded.value
        if isinstance(data, list):
            data = data[0] if data else {}
        if not isinstance(data, dict):
            raise ResponseError("unexpected /generate body: not an object")
        return _completion_from_generate(data, elapsed, decoded.surrogates_replaced)

    # ---- token ids (self-consistency probes) -------------------------------------------------------

    def tokenize_chat(
        self,
        messages: list[dict[str, str]],
        chat_template_kwargs: dict[str, Any] | None,
        tools: list[dict[str, Any]] | None = None,
    ) -> list[int]:
        """The prompt ids the chat endpoint would use for `messages` (chat template applied, with the
        declared `tools` where given: /v1/tokenize takes them, 0.5.15 and 0.5.23 protocol.py)."""
        body: dict[str, Any] = {"messages": messages}
        if chat_template_kwargs:
            body["chat_template_kwargs"] = chat_template_kwargs
        if tools:
            body["tools"] = tools
        answer: TokenizeAnswer = self._answer(
            TokenizeAnswer, "/v1/tokenize", self._request("POST", "/v1/tokenize", body)
        )
        return list(answer.tokens)

    def detokenize(self, ids: list[int]) -> str:
        data = self._request("POST", "/v1/detokenize", {"tokens": ids})
        answer: DetokenizeAnswer = self._answer(DetokenizeAnswer, "/v1/detokenize", data)
        return answer.text

    def generate_tokens(
        self,
        *,
        input_ids: list[int] | None = None,
        text: str | None = None,
        temperature: float,
        max_new_tokens: int,
        top_logprobs: int = 0,
        logprobs: bool = False,
        top_p: float | None = None,
        seed: int | None = None,
    ) -> TokenCompletion:
        """/generate from token ids (or text), asking for the prompt ids back (greedy at temperature 0).
        With `top_logprobs` >= 2 the answer carries the top-2 margin of every output token; with
        `logprobs` (or any `top_logprobs`) each output token's decode log-probability."""
        params: dict[str, Any] = {"temperature": temperature, "max_new_tokens": max_new_tokens}
        if top_p is not None:
            params["top_p"] = top_p
        if seed is not None:
            params["sampling_seed"] = seed
        body: dict[str, Any] = {"sampling_params": params, "return_prompt_token_ids": True}
        if top_logprobs > 0 or logprobs:
            body["return_logprob"] = True
        if top_logprobs > 0:
            body["top_logprobs_num"] = top_logprobs
        if input_ids is not None:
            body["input_ids"] = input_ids
        else:
            body["text"] = text or ""
        started = time.monotonic()
        decoded = self._request_decoded("POST", "/generate", body)
        elapsed = time.monotonic() - started
        data = decoded.value
        if isinstance(data, list):
            data = data[0] if data else {}
        answer: GenerateAnswer = self._answer(GenerateAnswer, "/generate", data)
        if answer.output_ids is None:
            raise ResponseError("unexpected /generate body: no output_ids")
        prompt_ids = answer.prompt_token_ids if answer.prompt_token_ids is not None else input_ids
        if prompt_ids is None:
            raise ResponseError("unexpected /generate body: no prompt_token_ids")
        margins = top2_margins(data.get("meta_info")) if top_logprobs >= 2 else None
        own = (
            token_logprobs(data.get("meta_info"), "output_token_logprobs")
            if body.get("return_logprob")
            else None
        )
        return TokenCompletion(
            _completion_from_generate(data, elapsed, decoded.surrogates_replaced),
            list(prompt_ids),
            list(answer.output_ids),
            margins,
            [v for v, _ in own] if own is not None else None,
        )

    def prompt_logprobs(
        self, ids: list[int], start: int, top: int
    ) -> list[tuple[float | None, list[tuple[float, int]] | None]]:
        """One prefill of `ids` with the target's own log-probability of every token from `start` on
        (SGLang's input_token_logprobs: entry 0 is token `start`, without a value) and the `top` best
        at each position. One output token is generated (SGLang needs at least one)."""
        body = {
            "input_ids": ids,
            "sampling_params": {"temperature": 0, "max_new_tokens": 1},
            "return_logprob": True,
            "logprob_start_len": start,
            "top_logprobs_num": top,
        }
        data = self._request("POST", "/generate", body)
        if isinstance(data, list):
            data = data[0] if data else {}
        meta = data.get("meta_info") if isinstance(data, dict) else None
        values = token_logprobs(meta, "input_token_logprobs")
        tops = top_lists(meta, "input_top_logprobs")
        if values is None or tops is None or len(values) != len(tops) or len(values) != len(ids) - start:
            raise ResponseError(
                "/generate did not return the prompt's log-probabilities (input_token_logprobs, "
                f"input_top_logprobs) for {len(ids) - start} tokens"
            )
        return [(v, t) for (v, _), t in zip(values, tops, strict=True)]

    def next_tokens(self, prefixes: list[list[int]]) -> list[int]:
        """One greedy token after each of `prefixes`, sent as one batched /generate request."""
        if not prefixes:
            return []
        body = {"input_ids": prefixes, "sampling_params": {"temperature": 0, "max_new_tokens": 1}}
        data = self._request("POST", "/generate", body)
        items = data if isinstance(data, list) else [data]
        if len(items) != len(prefixes):
            raise ResponseError(f"/generate answered {len(items)} results for {len(prefixes)} inputs")
        out = []
        for item in items:
            answer: GenerateAnswer = self._answer(GenerateAnswer, "/generate", item)
            if not answer.output_ids:
                raise ResponseError("/generate returned no token for a probe")
            out.append(answer.output_ids[0])
        return out

    def health_status(self) -> int | None:
        """The HTTP status /health answers now (SGLang's one-token generation check), None when the
        server cannot be reached: shown beside a failed suite, where 200 is the point."""
        try:
            return self._send("GET", "/health").status_code
        except (UnreachableError, ResponseError):
            return None

    def flush_cache(self, timeout: float = 0.0) -> tuple[bool, str]:
        """Ask the server to drop its prefix cache. (False, its message) when it refuses (HTTP 400: requests
        are running or waiting)."""
        path = f"/flush_cache?timeout={timeout:g}" if timeout > 0 else "/flush_cache"
        response = self._send("POST", path)
        message = clean(response.text.strip(), limit=200)
        if response.status_code == 200:
            return True, message
        if response.status_code == 400:
            return False, message or "HTTP 400"
        raise ResponseError(f"HTTP {response.status_code} from /flush_cache: {message}")


def top2_margins(meta_info: Any) -> list[float | None] | None:
    """Top-1 minus top-2 log-probability of each output token, from SGLang's
    `meta_info.output_top_logprobs`: one entry per output token, each None or a list of
    [logprob, token_id, text-or-null] best first. None when the field is absent or malformed."""
    if not isinstance(meta_info, dict):
        return None
    tops = meta_info.get("output_top_logprobs")
    if not isinstance(tops, list):
        return None
    margins: list[float | None] = []
    for entry in tops:
        values = [
            item[0]
            for item in (entry if isinstance(entry, list) else [])
            if isinstance(item, (list, tuple)) and item and isinstance(item[0], (int, float))
        ]
        margins.append(round(float(values[0]) - float(values[1]), 5) if len(values) >= 2 else None)
    return margins


def token_logprobs(meta_info: Any, key: str) -> list[tuple[float | None, int | None]] | None:
    """SGLang's `[logprob, token_id, text-or-null]` triples under `key`; None when absent or malformed."""
    if not isinstance(meta_info, dict) or not isinstance(meta_info.get(key), list):
        return None
    out: list[tuple[float | None, int | None]] = []
    for entry in meta_info[key]:
        if not isinstance(entry, (list, tuple)) or not entry:
            return None
        value = entry[0]
        token = entry[1] if len(entry) > 1 and isinstance(entry[1], int) else None
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            return None
        out.append((None if value is None else float(value), token))
    return out


def top_lists(meta_info: Any, key: str) -> list[list[tuple[float, int]] | None] | None:
    """Per position, the best `(logprob, token_id)` pairs under `key` (None where SGLang gives none)."""
    if not isinstance(meta_info, dict) or not isinstance(meta_info.get(key), list):
        return None
    out: list[list[tuple[float, int]] | None] = []
    for entry in meta_info[key]:
        if entry is None:
            out.append(None)
            continue
        if not isinstance(entry, list):
            return None
        pairs = [
            (float(item[0]), int(item[1]))
            for item in entry
            if isinstance(item, (list, tuple))
            and len(item) >= 2
            and isinstance(item[0], (int, float))
            and not isinstance(item[0], bool)
            and isinstance(item[1], int)
        ]
        out.append(pairs)
    return out


def _completion_from_generate(data: dict[str, Any], elapsed: float, surrogates: int = 0) -> Completion:
    try:
        answer = parse_answer(GenerateAnswer, data)
    except ValueError as exc:
        raise ResponseError(f"unexpected /generate body: {clean(exc, limit=200)}") from None
    meta = answer.meta_info or MetaInfo()
    finish = meta.finish_reason
    if isinstance(finish, FinishReason):
        finish = finish.type
    return Completion(
        answer.text,
        "",
        finish,
        meta.completion_tokens,
        elapsed,
        meta.spec_accept_length,
        meta.spec_verify_ct,
        surrogates,
    )


def avg_accept_length(server_info: dict[str, Any] | None) -> float | None:
    """`internal_states[0].avg_spec_accept_length`, when the server runs speculative decoding."""
    if not server_info:
        return None
    states = server_info.get("internal_states")
    if isinstance(states, list) and states and isinstance(states[0], dict):
        value = states[0].get("avg_spec_accept_length")
        if isinstance(value, (int, float)):
            return float(value)
    return None


_IDENTITY_KEYS = (
    "model_path",
    "served_model_name",
    "tp_size",
    "attention_backend",
    "speculative_algorithm",
    "speculative_draft_model_path",
    "speculative_num_draft_tokens",
    "speculative_dflash_block_size",
    "speculative_ddtree_budget",
    "speculative_eagle_topk",
    "speculative_num_steps",
    "page_size",
    "disable_overlap_schedule",
)


def server_identity(server_info: dict[str, Any] | None, model: str) -> dict[str, Any]:
    """What a baseline must record to be comparable later: model, version, key server args."""
    info = server_info or {}
    args = {k: info[k] for k in _IDENTITY_KEYS if k in info}
    if isinstance(info.get("server_args"), dict):
        args.update({k: info["server_args"][k] for k in _IDENTITY_KEYS if k in info["server_args"]})
    return {"model": model, "version": info.get("version"), "server_args": args}
