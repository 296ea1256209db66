"""What the lab server offers the self-consistency probes, with SGLang's semantics: /v1/tokenize,
/generate by ids with prompt ids back, a prefix cache that reuses KV, /flush_cache refused while busy,
the lifetime accept length in /server_info, and the near-tie switch."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx
import pytest

from tests.lab_server.helpers import TOKENIZER

pytestmark = pytest.mark.lab

DDTREE_B7 = [
    "--speculative-algorithm",
    "DDTREE",
    "--speculative-dflash-block-size",
    "8",
    "--speculative-ddtree-budget",
    "7",
]
CAPITAL = [{"role": "user", "content": "What is the capital of France?"}]


def post(url: str, path: str, body: dict[str, Any] | None = None) -> httpx.Response:
    return httpx.post(url + path, json=body, timeout=60, trust_env=False)


def generate(url: str, ids: list[int], max_new: int, **extra: Any) -> dict[str, Any]:
    body = {"input_ids": ids, "sampling_params": {"temperature": 0, "max_new_tokens": max_new}, **extra}
    response = post(url, "/generate", body)
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()
    return data


def test_token_ids_prefix_cache_and_flush(server_factory: Any) -> None:
    server = server_factory([*DDTREE_B7, "--decode-log-interval", "1000"])
    url = server.url
    tok = post(url, "/v1/tokenize", {"messages": CAPITAL, "chat_template_kwargs": {"thinking": False}}).json()
    assert tok["tokens"] == TOKENIZER.encode(TOKENIZER.decode(tok["tokens"]))
    assert tok["count"] == len(tok["tokens"]) and tok["max_model_len"] == 2048
    assert TOKENIZER.decode(tok["tokens"]).endswith("<think></think>")  # the chat template, thinking off
    many = post(url, "/v1/tokenize", {"prompt": ["a", "bc"]}).json()
    assert many["count"] == [1, 2]
    assert post(url, "/v1/tokenize", {"prompt": "a", "messages": CAPITAL}).status_code == 400

    first = generate(url, tok["tokens"], 30, return_prompt_token_ids=True)
    assert first["prompt_token_ids"] == tok["tokens"] and len(first["output_ids"]) >= 24
    assert "Paris" in first["text"]
    assert first["meta_info"]["cached_tokens"] == 0
    assert post(url, "/v1/detokenize", {"tokens": first["output_ids"]}).json()["text"] == first["text"]

    # the finished request's KV (prompt and output) is reused by a longer prompt starting with it
    again = generate(url, tok["tokens"] + first["output_ids"][:10], 1)
    assert again["meta_info"]["cached_tokens"] == len(tok["tokens"]) + 9
    assert again["output_ids"] == first["output_ids"][10:11]

    # no decode-log roll-up yet (interval 1000): SGLang has no lifetime average to show
    assert (
        "avg_spec_accept_length"
        not in httpx.get(url + "/server_info", trust_env=False).json()["internal_states"][0]
    )

    flushed = post(url, "/flush_cache")
    assert flushed.status_code == 200 and flushed.text.startswith("Cache flushed.")
    after = generate(url, tok["tokens"] + first["output_ids"][:10], 1)
    assert after["meta_info"]["cached_tokens"] == 0


def test_flush_refused_while_a_request_runs(server_factory: Any) -> None:
    server = server_factory(DDTREE_B7)
    body = {"text": "Bees live", "sampling_params": {"max_new_tokens": 1800, "ignore_eos": True}}
    long = threading.Thread(target=post, args=(server.url, "/generate", body))
    long.start()
    refused = None
    for _ in range(400):
        state = httpx.get(server.url + "/server_info", trust_env=False).json()["internal_states"][0]
        if state["num_running_reqs"]:
            refused = post(server.url, "/flush_cache")
            break
        time.sleep(0.01)
    assert refused is not None and refused.status_code == 400
    assert "Cache not flushed because there are pending requests" in server.log()
    waited = post(server.url, "/flush_cache?timeout=60")  # waits for the request to finish
    long.join()
    assert waited.status_code == 200


def test_lifetime_accept_length_rolls_up_every_interval_and_resets_on_flush(server_factory: Any) -> None:
    server = server_factory([*DDTREE_B7, "--decode-log-interval", "5"])

    def average() -> float | None:
        state = httpx.get(server.url + "/server_info", trust_env=False).json()["internal_states"][0]
        value = state.get("avg_spec_accept_length")
        return None if value is None else float(value)

    generate(server.url, TOKENIZER.encode("Bees live together in a hive."), 200)
    assert (average() or 0) > 2.0  # warm-up and this request, rolled up at the log lines
    assert post(server.url, "/flush_cache").status_code == 200
    assert average() is None  # reset by the flush: nothing verified since


def test_near_tie_switch_depends_on_batch_shape_and_deterministic_mode_removes_it(
    server_factory: Any,
) -> None:
    prompts = [TOKENIZER.encode(p) for p in ("Bees live together in a hive.", "Bread is made from")]
    env = {"K26LAB_NEAR_TIE_RATE": "0.5", "K26LAB_NEAR_TIE_GAP": "6.0"}  # strong, to show in 2 answers
    noisy = server_factory(DDTREE_B7, env=env)
    steady = server_factory([*DDTREE_B7, "--enable-deterministic-inference"], env=env)

    def outputs(url: str) -> tuple[list[list[int]], list[list[int]]]:
        alone = [generate(url, p, 120)["output_ids"] for p in prompts]
        post(url, "/flush_cache")
        batch = post(
            url,
            "/generate",
            {"input_ids": prompts, "sampling_params": {"temperature": 0, "max_new_tokens": 120}},
        ).json()
        post(url, "/flush_cache")
        return alone, [b["output_ids"] for b in batch]

    alone, batched = outputs(noisy.url)
    assert alone != batched  # the same greedy requests, another batch shape, another answer
    assert outputs(noisy.url) == (alone, batched)  # but the same shape always gives the same one
    alone, batched = outputs(steady.url)
    assert alone == batched
