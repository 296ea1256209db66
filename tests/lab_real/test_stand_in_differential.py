"""The stand-in lab server and real SGLang 0.5.15 asked the same questions: where k26ctl reads an
answer, both must give it the same shape (status codes, the keys and types k26ctl reads). Each
question is one function over a base URL; the test runs every one against both servers."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from tests.support.lab_server import lab_server

from .realserver import GOOD, k26_json, sets, url

pytestmark = [pytest.mark.realsglang, pytest.mark.labhost, pytest.mark.lab, pytest.mark.timeout(1200)]

Question = Callable[[str, str], Any]  # (base URL, served model name) -> a comparable answer shape


def _keys(data: dict[str, Any], names: tuple[str, ...]) -> dict[str, str]:
    return {name: type(data.get(name)).__name__ for name in names}


def health(base: str, model: str) -> Any:
    return httpx.get(f"{base}/health", timeout=60).status_code


def models(base: str, model: str) -> Any:
    response = httpx.get(f"{base}/v1/models", timeout=30)
    data = response.json()
    return response.status_code, data["object"], [m["id"] == model for m in data["data"]]


def model_by_id(base: str, model: str) -> Any:
    known = httpx.get(f"{base}/v1/models/{model}", timeout=30)
    unknown = httpx.get(f"{base}/v1/models/no-such-model", timeout=30)
    return known.status_code, known.json().get("id") == model, unknown.status_code


def tokenize_chat(base: str, model: str) -> Any:
    body = {"model": model, "messages": [{"role": "user", "content": "What is the capital of France?"}]}
    response = httpx.post(f"{base}/v1/tokenize", json=body, timeout=30)
    data = response.json()
    return (
        response.status_code,
        _keys(data, ("tokens", "count")),
        data.get("count") == len(data.get("tokens", [])),
    )


def generate_ids(base: str, model: str) -> Any:
    body = {
        "input_ids": [1, 2, 3, 4],
        "sampling_params": {"temperature": 0, "max_new_tokens": 4, "ignore_eos": True},
    }
    data = httpx.post(f"{base}/generate", json=body, timeout=60).json()
    meta = data["meta_info"]
    return (
        len(data["output_ids"]),
        _keys(meta, ("prompt_tokens", "completion_tokens", "cached_tokens")),
        meta["finish_reason"]["type"],
        meta["prompt_tokens"],
    )


def _triple_shape(entry: Any) -> str:
    """The shape of one SGLang logprob entry: [value, token id, text-or-null]."""
    if not isinstance(entry, list):
        return type(entry).__name__
    return "/".join(type(x).__name__ for x in entry)


def sampled_logprobs(base: str, model: str) -> Any:
    """A sampled answer's own decode log-probabilities (what the rescoring probes compare)."""
    body = {
        "input_ids": [1, 2, 3, 4],
        "sampling_params": {"temperature": 0.7, "max_new_tokens": 4, "ignore_eos": True},
        "return_logprob": True,
    }
    data = httpx.post(f"{base}/generate", json=body, timeout=60).json()
    meta = data["meta_info"]
    out = meta["output_token_logprobs"]
    return (
        len(out) == len(data["output_ids"]),
        [entry[1] for entry in out] == data["output_ids"],
        {_triple_shape(entry) for entry in out},
        all(entry[0] <= 0 for entry in out),
        [_triple_shape(entry) for entry in meta["input_token_logprobs"]],
    )


def prompt_logprobs(base: str, model: str) -> Any:
    """The prompt's own log-probabilities from logprob_start_len, with the best two per position (the
    rescoring prefill)."""
    ids = [1, 2, 3, 4, 5, 6, 7, 8]
    body = {
        "input_ids": ids,
        "sampling_params": {"temperature": 0, "max_new_tokens": 1},
        "return_logprob": True,
        "logprob_start_len": 3,
        "top_logprobs_num": 2,
    }
    meta = httpx.post(f"{base}/generate", json=body, timeout=60).json()["meta_info"]
    values, tops = meta["input_token_logprobs"], meta["input_top_logprobs"]
    return (
        [_triple_shape(entry) for entry in values],
        [entry[1] for entry in values] == ids[3:],
        [None if top is None else [_triple_shape(x) for x in top] for top in tops],
        all(top is None or top[0][0] >= top[1][0] for top in tops),
    )


def flush_idle(base: str, model: str) -> Any:
    return httpx.post(f"{base}/flush_cache", timeout=30).status_code


def over_long_prompt(base: str, model: str) -> Any:
    body = {"input_ids": [5] * 5000, "sampling_params": {"max_new_tokens": 1}}
    response = httpx.post(f"{base}/generate", json=body, timeout=60)
    return response.status_code


def server_info_keys(base: str, model: str) -> Any:
    data = httpx.get(f"{base}/server_info", timeout=30).json()
    state = (data.get("internal_states") or [{}])[0]
    return (
        _keys(data, ("version", "model_path", "served_model_name", "tp_size", "max_running_requests")),
        isinstance(state, dict),
    )


def metrics_names(base: str, model: str) -> Any:
    text = httpx.get(f"{base}/metrics", timeout=30).text
    names = ("sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:gen_throughput")
    return {name: name in text for name in names}


def keep_alive_after_404(base: str, model: str) -> Any:
    """A POST answered 404, then a GET on the same connection: the second must be answered normally."""
    host, port = base.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        body = b'{"a": 1}'
        sock.sendall(
            b"POST /no-such-endpoint HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
            + b"GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        raw = b""
        while chunk := sock.recv(65536):
            raw += chunk
    statuses = [
        line.split()[1] for line in raw.decode(errors="replace").split("\r\n") if line.startswith("HTTP/1.1 ")
    ]
    return statuses


QUESTIONS: list[Question] = [
    health,
    models,
    model_by_id,
    tokenize_chat,
    generate_ids,
    sampled_logprobs,
    prompt_logprobs,
    flush_idle,
    over_long_prompt,
    server_info_keys,
    metrics_names,
    keep_alive_after_404,
]


@pytest.fixture(scope="module")
def both(real_host: Any) -> Iterator[dict[str, tuple[str, str]]]:
    code, doc = k26_json("deploy", GOOD, *sets(real_host), "--yes")
    assert code == 0, doc
    with lab_server("none") as stand_in:
        yield {"stand-in": (stand_in.url, "k26lab-tiny"), "real": (url(real_host, ""), "k26real-tiny")}


@pytest.mark.parametrize("question", QUESTIONS, ids=lambda q: q.__name__)
def test_the_stand_in_answers_as_real_sglang_does(
    both: dict[str, tuple[str, str]], question: Question
) -> None:
    answers = {name: question(base, model) for name, (base, model) in both.items()}
    assert answers["stand-in"] == answers["real"], answers
