"""The official `openai` Python client against the lab: chat, completions, streaming, models."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.lab

openai = pytest.importorskip("openai", reason="the official client is in the test extra")


@pytest.fixture(scope="module")
def api(lab_server: Any) -> Any:
    return openai.OpenAI(base_url=lab_server.url + "/v1", api_key="unused", max_retries=0, timeout=60)


def test_models(api: Any) -> None:
    assert [m.id for m in api.models.list().data] == ["k26lab-tiny"]
    assert api.models.retrieve("k26lab-tiny").id == "k26lab-tiny"
    with pytest.raises(openai.NotFoundError):
        api.models.retrieve("no-such-model")


def test_chat(api: Any) -> None:
    reply = api.chat.completions.create(
        model="k26lab-tiny",
        messages=[{"role": "user", "content": "What is the capital of France?"}],
        max_tokens=48,
        temperature=0,
    )
    message = reply.choices[0].message
    assert message.content or (message.model_extra or {}).get("reasoning_content")
    assert reply.usage is not None and reply.usage.completion_tokens > 0


def test_chat_stream(api: Any) -> None:
    stream = api.chat.completions.create(
        model="k26lab-tiny",
        messages=[{"role": "user", "content": "Name a colour."}],
        max_tokens=24,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert chunks and chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0


def test_completions_and_stream(api: Any) -> None:
    done = api.completions.create(model="k26lab-tiny", prompt="The lighthouse stood", max_tokens=16)
    assert done.choices[0].text
    pieces = [
        c.choices[0].text
        for c in api.completions.create(
            model="k26lab-tiny", prompt="The lighthouse stood", max_tokens=16, stream=True
        )
        if c.choices
    ]
    assert "".join(pieces)


def test_bad_request_maps_to_the_clients_error(api: Any) -> None:
    with pytest.raises(openai.BadRequestError):
        api.chat.completions.create(model="k26lab-tiny", messages=[], max_tokens=4)
