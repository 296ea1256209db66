"""The lab's HTTP answers validate against SGLang's own pydantic protocol models, per release."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

pytestmark = [pytest.mark.network_sglang, pytest.mark.lab]

CHAT = {"model": "k26lab-tiny", "messages": [{"role": "user", "content": "What is the capital of France?"}]}


def _sse(response: httpx.Response) -> list[dict[str, Any]]:
    chunks = []
    for line in response.text.splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            chunks.append(json.loads(line[len("data: ") :]))
    return chunks


def test_models(protocol: Any, lab_server: Any) -> None:
    listing = httpx.get(lab_server.url + "/v1/models", timeout=10).json()
    protocol.ModelList.model_validate(listing, strict=False)
    card = httpx.get(lab_server.url + "/v1/models/k26lab-tiny", timeout=10).json()
    assert protocol.ModelCard.model_validate(card).id == "k26lab-tiny"


def test_chat_completion(protocol: Any, lab_server: Any) -> None:
    body = {**CHAT, "max_tokens": 48, "temperature": 0}
    answer = httpx.post(lab_server.url + "/v1/chat/completions", json=body, timeout=60).json()
    parsed = protocol.ChatCompletionResponse.model_validate(answer)
    assert parsed.choices[0].message.content or parsed.choices[0].message.reasoning_content


def test_chat_stream_chunks(protocol: Any, lab_server: Any) -> None:
    body = {**CHAT, "max_tokens": 24, "stream": True, "stream_options": {"include_usage": True}}
    chunks = _sse(httpx.post(lab_server.url + "/v1/chat/completions", json=body, timeout=60))
    assert len(chunks) > 2
    for chunk in chunks:
        protocol.ChatCompletionStreamResponse.model_validate(chunk)


def test_completion_and_stream(protocol: Any, lab_server: Any) -> None:
    body = {"model": "k26lab-tiny", "prompt": "The lighthouse stood", "max_tokens": 16, "temperature": 0}
    answer = httpx.post(lab_server.url + "/v1/completions", json=body, timeout=60).json()
    assert protocol.CompletionResponse.model_validate(answer).choices[0].text
    chunks = _sse(httpx.post(lab_server.url + "/v1/completions", json={**body, "stream": True}, timeout=60))
    assert chunks
    for chunk in chunks:
        protocol.CompletionStreamResponse.model_validate(chunk)


def test_error(protocol: Any, lab_server: Any) -> None:
    response = httpx.post(lab_server.url + "/v1/chat/completions", json={**CHAT, "messages": []}, timeout=30)
    assert response.status_code == 400
    error = protocol.ErrorResponse.model_validate(response.json())
    assert error.code == 400 and error.message


def test_chat_completion_with_a_tool_call(protocol: Any) -> None:
    """The lab's tool-call answer (kimi_k2 parser, tool-call checkpoint) is a valid SGLang response."""
    from tests.support.lab_server import lab_server as profile_server

    tool = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}
    body = {
        "model": "k26lab-tiny",
        "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
        "max_tokens": 256,
        "temperature": 0,
        "chat_template_kwargs": {"thinking": False},
        "tools": [tool],
    }
    with profile_server("ddtree-b7-tools") as server:
        answer = httpx.post(server.url + "/v1/chat/completions", json=body, timeout=60).json()
    parsed = protocol.ChatCompletionResponse.model_validate(answer)
    choice = parsed.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content == ""
    (call,) = choice.message.tool_calls
    assert (call.id, call.index, call.type, call.function.name) == (
        "functions.get_weather:0",
        0,
        "function",
        "get_weather",
    )
    assert json.loads(call.function.arguments) == {"city": "Paris", "unit": "celsius"}
