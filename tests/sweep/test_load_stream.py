"""The sweep's streaming load measurement over BoundedClient: chunks are timed as they arrive, and a
server that streams without end, drips, compresses or sends chunks of the wrong shape costs one
failed request sample (bounded in time and memory), never a hang or a traceback in a worker."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from k26ctl.httpsafe import BoundedClient
from k26ctl.sweep.load import LoadSpec, measure_level, stream_one
from tests.support.fake_sglang import FakeSGLang, start_in_thread
from tests.support.serving import serve_in_thread


def sse(meta: object) -> bytes:
    return b"data: " + json.dumps({"text": "x", "meta_info": meta}).encode() + b"\n\n"


PAUSE_BEFORE = 3  # the stub pauses before this chunk, so its gap must stand out


def good_stream(tokens: int = 6) -> list[tuple[float, bytes]]:
    script = [
        (0.0, sse({"completion_tokens": n, "spec_verify_ct": (n + 1) // 2})) for n in range(1, tokens + 1)
    ]
    script[PAUSE_BEFORE - 1] = (0.6, script[PAUSE_BEFORE - 1][1])
    return [*script, (0.0, b"data: [DONE]\n\n")]


class _SSEStub(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, script: list[tuple[float, bytes]]) -> None:
        super().__init__(("127.0.0.1", 0), _SSEHandler)
        self.script = script


class _SSEHandler(BaseHTTPRequestHandler):
    server: _SSEStub

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.flush()
        for delay, data in self.server.script:
            time.sleep(delay)
            self.wfile.write(data)
            self.wfile.flush()


@pytest.fixture
def serve() -> Iterator[object]:
    servers: list[ThreadingHTTPServer] = []

    def start(script: list[tuple[float, bytes]] | str) -> str:
        server: ThreadingHTTPServer
        if isinstance(script, str):
            server = start_in_thread(script)
        else:
            server = _SSEStub(script)
            serve_in_thread(server)
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        if isinstance(server, FakeSGLang):
            server.hung.set()
        server.shutdown()


def test_each_chunk_is_timed_when_it_arrives(serve) -> None:  # type: ignore[no-untyped-def]
    with BoundedClient(serve(good_stream()), timeout=30) as client:
        sample = stream_one(client, "hello", 6)
    assert sample.error is None and sample.completion_tokens == 6 and sample.verify_ct == 3
    assert sample.accept_length == 2.0
    assert sample.ttft is not None and len(sample.gaps) == 5
    # the one chunk the server held back is the longest gap: lines are not buffered until the end
    assert max(range(len(sample.gaps)), key=sample.gaps.__getitem__) == PAUSE_BEFORE - 2


def test_a_level_is_measured_through_the_bounded_client(serve) -> None:  # type: ignore[no-untyped-def]
    spec = LoadSpec(prompts=["a", "b"], concurrency=[2], requests_per_level=4, request_timeout=30)
    level = measure_level(serve(good_stream()), spec, 2)
    assert level.requests == 4 and level.errors == 0
    assert level.accept_length == 2.0 and level.output_tokens_per_s > 0


@pytest.mark.parametrize(
    ("mode", "error"),
    [
        ("endless", "BodyTooLarge: line longer than"),
        ("slow-body", "DeadlineExceeded"),
        ("gzip-bomb", "BadEncoding"),
    ],
)
def test_a_hostile_transport_is_one_failed_sample(serve, mode: str, error: str) -> None:  # type: ignore[no-untyped-def]
    with BoundedClient(serve(mode), timeout=2) as client:
        sample = stream_one(client, "hello", 8)
    assert sample.error is not None and sample.error.startswith(error), sample.error
    assert sample.completion_tokens == 0


@pytest.mark.parametrize(
    "line",
    [
        sse({"completion_tokens": "abc"}),
        sse({"completion_tokens": [1]}),
        sse({"completion_tokens": 2, "spec_verify_ct": -1}),
        sse([1, 2]),
        b"data: " + b"[" * 10_000 + b"]" * 10_000 + b"\n\n",
        b'data: {"meta_info": {"completion_tokens": ' + b"7" * 5000 + b"}}\n\n",
    ],
)
def test_chunks_of_the_wrong_shape_are_one_failed_sample(serve, line: bytes) -> None:  # type: ignore[no-untyped-def]
    with BoundedClient(serve([(0.0, sse({"completion_tokens": 1})), (0.0, line)]), timeout=10) as client:
        sample = stream_one(client, "hello", 8)
    assert sample.error is not None and sample.error.startswith(("ValueError", "JSONRefused")), sample.error
