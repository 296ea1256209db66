"""HTTP contract of a live `python -m k26ctl.lab.serve` process on 127.0.0.1: SGLang's endpoints,
JSON shapes, logs, batching of concurrent requests, and the bug seen from the outside."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.lab_server import LabServer, patched_tree, start_lab_server

pytestmark = pytest.mark.lab

KEY = "lab-secret"
AUTH = {"Authorization": f"Bearer {KEY}"}
CAPITAL = [{"role": "user", "content": "What is the capital of France?"}]
DDTREE = ["--speculative-algorithm", "DDTREE", "--speculative-dflash-block-size", "8"]


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, LabServer]]:
    """Started together to overlap their start-up: main (DDTree budget 7, reasoning parser, metrics,
    API key), plain (no metrics, /health without generation), broken (budget 16 unpatched) and fixed
    (budget 16 over a patched tree found on PYTHONPATH)."""
    tmp = tmp_path_factory.mktemp("http")
    patched = patched_tree(tmp / "patched")
    common = ["--served-model-name", "k26lab-tiny", "--reasoning-parser", "kimi_k2"]
    launched = {
        "main": start_lab_server(
            tmp,
            [
                *common,
                *DDTREE,
                "--speculative-ddtree-budget",
                "7",
                "--enable-metrics",
                "--api-key",
                KEY,
                "--decode-log-interval",
                "2",
            ],
            wait_ready=False,
        ),
        # as a unit that sets it: /health answers without generating
        "plain": start_lab_server(
            tmp, common, env={"SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION": "false"}, wait_ready=False
        ),
        "broken": start_lab_server(
            tmp,
            [*common, *DDTREE, "--speculative-ddtree-budget", "16"],
            env={"SGLANG_DDTREE_MAX_TOPK": "1"},
            wait_ready=False,
        ),
        "fixed": start_lab_server(
            tmp,
            [*common, *DDTREE, "--speculative-ddtree-budget", "16"],
            env={"SGLANG_DDTREE_MAX_TOPK": "1", "PYTHONPATH": str(patched)},
            wait_ready=False,
        ),
    }
    try:
        yield {name: server.wait_ready() for name, server in launched.items()}
    finally:
        for server in launched.values():
            server.stop()


@pytest.fixture(scope="module")
def main(servers: dict[str, LabServer]) -> LabServer:
    return servers["main"]


def _post(server: LabServer, path: str, body: dict[str, Any], **kw: Any) -> httpx.Response:
    return httpx.post(server.url + path, json=body, headers=AUTH, timeout=60, **kw)


def _sse(response: httpx.Response) -> list[Any]:
    events = []
    for line in response.text.splitlines():
        if line.startswith("data: "):
            payload = line[len("data: ") :]
            events.append(payload if payload == "[DONE]" else json.loads(payload))
    return events


def test_startup_logs_look_like_sglang(main: LabServer) -> None:
    log = main.log()
    assert "Load weight begin." in log
    assert re.search(r"Multi-thread loading shards: +\d+% Completed \| \d+/\d+ \[", log)
    assert re.search(r"Load weight end\. elapsed=[\d.]+ s", log)
    assert "Initialized DDTree worker. block_size=8, tree_budget=7, max_tree_nodes=8" in log
    assert log.index("Load weight end.") < log.index("The server is fired up and ready to roll!")


def test_health_and_models(main: LabServer) -> None:
    assert httpx.get(main.url + "/health", timeout=30).status_code == 200
    assert httpx.get(main.url + "/health_generate", timeout=30).status_code == 200
    assert httpx.get(main.url + "/v1/models", timeout=10).status_code == 401
    models = httpx.get(main.url + "/v1/models", headers=AUTH, timeout=10).json()
    assert models["object"] == "list"
    assert models["data"][0]["id"] == "k26lab-tiny" and models["data"][0]["max_model_len"] == 2048


def _timed_status(url: str) -> tuple[int, float]:
    started = time.monotonic()
    status = httpx.get(url, timeout=30).status_code
    return status, time.monotonic() - started


def test_health_looks_for_its_answer_once_a_second_as_sglang_s_does(
    main: LabServer, servers: dict[str, LabServer]
) -> None:
    """SGLang's /health generates one token and checks for an answer after each second, so a 200 never
    comes sooner than 1 s (http_server.py, health_generate); a readiness check built on the lab must
    meet that floor. SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION=false makes /health answer without
    generating; /health_generate still generates."""
    for path in ("/health", "/health_generate"):
        status, seconds = _timed_status(main.url + path)
        assert status == 200 and seconds >= 1.0, (path, status, seconds)
    plain = servers["plain"].url
    quick, quick_seconds = _timed_status(plain + "/health")
    generated, generated_seconds = _timed_status(plain + "/health_generate")
    assert (quick, generated) == (200, 200) and generated_seconds >= 1.0
    assert quick_seconds < generated_seconds - 0.5, (quick_seconds, generated_seconds)


def test_a_single_model_is_retrieved_as_sglang_does(main: LabServer) -> None:
    card = httpx.get(main.url + "/v1/models/k26lab-tiny", headers=AUTH, timeout=10)
    assert card.status_code == 200 and card.json()["id"] == "k26lab-tiny" and card.json()["object"] == "model"
    missing = httpx.get(main.url + "/v1/models/other", headers=AUTH, timeout=10)
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "model_not_found"


def test_keep_alive_survives_a_refused_post(main: LabServer) -> None:
    """A 404 or 401 to a POST must not leave its body in the socket for the next request to trip on."""
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", main.port, timeout=10)
    try:
        body = json.dumps({"text": "x" * 500})
        for path, headers in (("/v1/nothing-here", AUTH), ("/generate", {})):
            conn.request("POST", path, body=body, headers={**headers, "Content-Type": "application/json"})
            refused = conn.getresponse()
            refused.read()
            assert refused.status in (401, 404)
            conn.request("GET", "/v1/models", headers=AUTH)
            after = conn.getresponse()
            assert after.status == 200 and json.loads(after.read())["object"] == "list"
    finally:
        conn.close()


def test_no_accept_length_when_nothing_was_verified(main: LabServer) -> None:
    """One token comes from the prefill alone: SGLang then reports no spec fields at all."""
    meta = _post(main, "/generate", {"text": "The", "sampling_params": {"max_new_tokens": 1}}).json()[
        "meta_info"
    ]
    assert meta["completion_tokens"] == 1
    assert "spec_accept_length" not in meta and "spec_verify_ct" not in meta


def test_api_key_is_enforced_on_generation(main: LabServer) -> None:
    r = httpx.post(main.url + "/generate", json={"text": "The"}, timeout=10)
    assert r.status_code == 401
    r = httpx.post(
        main.url + "/generate", json={"text": "The"}, headers={"Authorization": "Bearer nope"}, timeout=10
    )
    assert r.status_code == 401


def test_chat_separates_reasoning(main: LabServer) -> None:
    body = _post(
        main, "/v1/chat/completions", {"model": "k26lab-tiny", "messages": CAPITAL, "max_tokens": 200}
    ).json()
    assert body["object"] == "chat.completion"
    message = body["choices"][0]["message"]
    assert message["reasoning_content"] == "The user asks for the capital city of France. That is Paris."
    assert message["content"] == "The capital of France is Paris."
    assert body["choices"][0]["finish_reason"] == "stop"
    usage = body["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


def test_chat_thinking_off(main: LabServer) -> None:
    body = _post(
        main,
        "/v1/chat/completions",
        {
            "messages": CAPITAL,
            "max_tokens": 100,
            "chat_template_kwargs": {"thinking": False},
        },
    ).json()
    message = body["choices"][0]["message"]
    assert message["reasoning_content"] is None
    assert message["content"] == "The capital of France is Paris."


def test_chat_stream_matches_non_stream(main: LabServer) -> None:
    events = _sse(
        _post(main, "/v1/chat/completions", {"messages": CAPITAL, "max_tokens": 200, "stream": True})
    )
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    reasoning = "".join(c["choices"][0]["delta"].get("reasoning_content") or "" for c in chunks)
    content = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    assert reasoning == "The user asks for the capital city of France. That is Paris."
    assert content == "The capital of France is Paris."
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


def test_completions_and_stream(main: LabServer) -> None:
    body = _post(main, "/v1/completions", {"prompt": "The lighthouse stood", "max_tokens": 40}).json()
    choice = body["choices"][0]
    assert body["object"] == "text_completion"
    assert choice["text"].startswith(" at the end of a long stone pier.")
    assert choice["finish_reason"] == "length" and body["usage"]["completion_tokens"] == 40
    events = _sse(
        _post(main, "/v1/completions", {"prompt": "The lighthouse stood", "max_tokens": 40, "stream": True})
    )
    assert events[-1] == "[DONE]"
    assert "".join(e["choices"][0]["text"] for e in events[:-1]) == choice["text"]
    stopped = _post(
        main, "/v1/completions", {"prompt": "The lighthouse stood", "max_tokens": 40, "stop": "pier"}
    ).json()
    assert stopped["choices"][0]["text"] == " at the end of a long stone "
    assert stopped["choices"][0]["finish_reason"] == "stop"


def test_native_generate_meta_info(main: LabServer) -> None:
    body = _post(
        main, "/generate", {"text": "The lighthouse stood", "sampling_params": {"max_new_tokens": 64}}
    ).json()
    meta = body["meta_info"]
    assert meta["completion_tokens"] == len(body["output_ids"]) == 64
    assert meta["spec_verify_ct"] > 0
    assert meta["spec_accept_length"] == pytest.approx(64 / meta["spec_verify_ct"], rel=1e-3)
    assert meta["spec_accept_length"] > 3.0
    assert meta["finish_reason"]["type"] == "length"
    batch = _post(
        main,
        "/generate",
        {"text": ["The lighthouse stood", "Bread is made from"], "sampling_params": {"max_new_tokens": 8}},
    ).json()
    assert isinstance(batch, list) and len(batch) == 2
    events = _sse(
        _post(
            main,
            "/generate",
            {"text": "The lighthouse stood", "stream": True, "sampling_params": {"max_new_tokens": 64}},
        )
    )
    assert events[-1] == "[DONE]"
    assert events[-2]["text"] == body["text"] and events[-2]["meta_info"]["finish_reason"]["type"] == "length"


def test_server_info_metrics_flush(main: LabServer) -> None:
    _post(main, "/generate", {"text": "Bread is made from", "sampling_params": {"max_new_tokens": 32}})
    info = httpx.get(main.url + "/server_info", headers=AUTH, timeout=10).json()
    assert info["version"] == "0.5.15"
    assert info["speculative_ddtree_budget"] == 7 and info["speculative_num_draft_tokens"] == 8
    assert info["internal_states"][0]["avg_spec_accept_length"] > 2.0
    assert info["api_key"] == "***"
    metrics = httpx.get(main.url + "/metrics", timeout=10)
    assert metrics.status_code == 200 and metrics.headers["content-type"].startswith("text/plain")
    match = re.search(r'^sglang:spec_accept_length\{model_name="k26lab-tiny"\} ([\d.]+)$', metrics.text, re.M)
    assert match and float(match.group(1)) > 2.0
    for name in (
        "sglang:spec_verify_calls_total",
        "sglang:gen_throughput",
        "sglang:num_running_reqs",
        "sglang:spec_accept_rate",
    ):
        assert f"# TYPE {name} " in metrics.text
    # the prompt's prefix came from the cache the second time, counted as SGLang counts it
    _post(main, "/generate", {"text": "Bread is made from", "sampling_params": {"max_new_tokens": 4}})
    after = httpx.get(main.url + "/metrics", timeout=10).text
    cached = re.search(
        r'^sglang:cached_tokens_total\{model_name="k26lab-tiny",cache_source="total"\} ([\d.]+)$', after, re.M
    )
    assert cached and float(cached.group(1)) > 0
    assert httpx.get(main.url + "/flush_cache", headers=AUTH, timeout=10).status_code == 200
    assert httpx.post(main.url + "/flush_cache", headers=AUTH, timeout=10).status_code == 200


def test_errors_have_sglang_shapes(main: LabServer) -> None:
    assert httpx.get(main.url + "/nope", headers=AUTH, timeout=10).status_code == 404
    bad = httpx.post(main.url + "/v1/chat/completions", content=b"{not json", headers=AUTH, timeout=10)
    assert bad.status_code == 400 and bad.json()["object"] == "error"
    too_long = _post(main, "/v1/completions", {"prompt": "x" * 2048, "max_tokens": 4})
    assert too_long.status_code == 400 and "context length" in too_long.json()["message"]


def test_concurrent_requests_are_verified_as_one_batch(main: LabServer) -> None:
    prompts = ["The lighthouse stood", "Bread is made from", "A river begins", "Bees live together"]
    solo = [
        _post(main, "/generate", {"text": p, "sampling_params": {"max_new_tokens": 48}}).json()["text"]
        for p in prompts
    ]
    results: dict[int, str] = {}
    barrier = threading.Barrier(len(prompts))

    def send(i: int) -> None:
        barrier.wait()
        results[i] = _post(
            main, "/generate", {"text": prompts[i], "sampling_params": {"max_new_tokens": 48}}
        ).json()["text"]

    threads = [threading.Thread(target=send, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [results[i] for i in range(len(prompts))] == solo
    batches = [int(n) for n in re.findall(r"Decode batch, #running-req: (\d+),", main.log())]
    assert max(batches) >= 2, batches
    assert re.search(
        r"Decode batch, #running-req: \d+, #token: \d+, token usage: [\d.]+, accept len: [\d.]+, "
        r"accept rate: [\d.]+, cuda graph: False, gen throughput \(token/s\): [\d.]+, #queue-req: \d+",
        main.log(),
    )


def test_the_bug_from_outside_and_the_fix(servers: dict[str, LabServer]) -> None:
    def ask(server: LabServer) -> dict[str, Any]:
        return httpx.post(
            server.url + "/generate",
            json={"text": "The lighthouse stood", "sampling_params": {"max_new_tokens": 64}},
            timeout=60,
        ).json()

    plain, broken, fixed = ask(servers["plain"]), ask(servers["broken"]), ask(servers["fixed"])
    assert "spec_accept_length" not in plain["meta_info"]
    # one request on a width-1 chain: every accepted row was computed, but with the wrong mask
    assert broken["text"] != plain["text"] and broken["meta_info"]["spec_accept_length"] < 2.0
    assert httpx.get(servers["broken"].url + "/health", timeout=30).status_code == 200, "health says nothing"
    assert fixed["text"] == plain["text"] and fixed["meta_info"]["spec_accept_length"] > 3.0

    # two concurrent requests (what smoke sends): the second one's rows are never computed -> NaN -> "!"
    def concurrent_pair() -> list[str]:
        answers: dict[int, str] = {}
        barrier = threading.Barrier(2)

        def chat(i: int) -> None:
            barrier.wait()
            body = httpx.post(
                servers["broken"].url + "/v1/chat/completions",
                json={"messages": CAPITAL, "max_tokens": 120},
                timeout=60,
            ).json()
            message = body["choices"][0]["message"]
            answers[i] = (message["reasoning_content"] or "") + message["content"]

        threads = [threading.Thread(target=chat, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return list(answers.values())

    # the pair must overlap in the scheduler; on a starved machine one may finish before the other lands
    attempts = [concurrent_pair() for _ in range(3)]
    assert any("!!!!!!!!" in text for pair in attempts for text in pair), attempts
    fixed_info = httpx.get(servers["fixed"].url + "/server_info", timeout=10).json()["lab"]
    assert (
        fixed_info["target_backend_num_draft_tokens"] == 17
        and fixed_info["draft_backend_num_draft_tokens"] == 8
    )
    assert Path(fixed_info["tree"]).name == "patched", "the tree on PYTHONPATH is used"
    assert (
        httpx.get(servers["broken"].url + "/server_info", timeout=10)
        .json()["lab"]["tree"]
        .endswith("/k26ctl/lab/server/sglang_tree")
    )
    assert httpx.get(servers["plain"].url + "/metrics", timeout=10).status_code == 404
