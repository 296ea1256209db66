"""The router adapter against routers that misbehave: an endless body, a slow body, a compression
bomb and answers of the wrong shape are RouterError/UnreachableError with one clear line (never a
traceback, never unbounded memory or time), and router-supplied strings reach messages sanitised."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from k26ctl.errors import UnreachableError
from k26ctl.fleet.router import Router, RouterError
from tests.support.fake_sglang import ESCAPES
from tests.support.serving import serve_in_thread


def test_an_endless_worker_list_is_cut_at_the_cap(fault) -> None:  # type: ignore[no-untyped-def]
    with Router(fault("endless"), timeout=20) as router, pytest.raises(RouterError) as caught:
        router.workers()
    assert "GET /workers" in str(caught.value) and "larger than" in str(caught.value)


def test_a_gzip_bomb_worker_list_is_cut_at_the_cap(fault) -> None:  # type: ignore[no-untyped-def]
    with Router(fault("gzip-bomb"), timeout=20) as router, pytest.raises(RouterError, match="larger than"):
        router.workers()


def test_a_slow_body_ends_at_the_request_deadline_and_counts_as_not_answering(fault) -> None:  # type: ignore[no-untyped-def]
    with Router(fault("slow-body"), timeout=1) as router:
        with pytest.raises(UnreachableError, match="did not answer GET /workers"):
            router.workers()
        # an operation retries a router that does not answer until its own deadline, then gives up
        with pytest.raises(UnreachableError):
            router.remove("http://10.231.1.2:30000", timeout=1.5)
        assert not router.alive()


@pytest.mark.parametrize("mode", ["wrong-types", "deep-json", "huge-numbers", "malformed"])
def test_answers_of_another_shape_are_router_errors(fault, mode: str) -> None:  # type: ignore[no-untyped-def]
    with Router(fault(mode), timeout=10) as router, pytest.raises(RouterError) as caught:
        router.workers()
    assert "not the 0.3.x shape" in str(caught.value)
    assert caught.value.hint and "0.3.x admin API" in caught.value.hint


class _Stub(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, answers: dict[tuple[str, str], tuple[int, object]]) -> None:
        super().__init__(("127.0.0.1", 0), _StubHandler)
        self.answers = answers


class _StubHandler(BaseHTTPRequestHandler):
    server: _Stub

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _answer(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        status, body = self.server.answers.get((method, self.path), (404, {"error": "not found"}))
        raw = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def do_GET(self) -> None:
        self._answer("GET")

    def do_POST(self) -> None:
        self._answer("POST")


@pytest.fixture
def stub() -> Iterator[object]:
    servers: list[_Stub] = []

    def start(answers: dict[tuple[str, str], tuple[int, object]]) -> str:
        server = _Stub(answers)
        serve_in_thread(server)
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"workers": [{"id": "a", "url": 5, "is_healthy": True}]}, "workers.0.url"),
        ({"workers": [{"id": "a", "url": "http://x", "load": -3}]}, "workers.0.load"),
        ({"workers": {"a": 1}}, "workers"),
        ([1, 2], "body"),
    ],
)
def test_a_wrong_worker_list_names_the_field(stub, body: object, field: str) -> None:  # type: ignore[no-untyped-def]
    with Router(stub({("GET", "/workers"): (200, body)})) as router, pytest.raises(RouterError) as caught:
        router.workers()
    assert f"({field}:" in str(caught.value)


def test_a_failed_registration_message_from_the_router_is_sanitised(stub) -> None:  # type: ignore[no-untyped-def]
    url = stub(
        {
            ("POST", "/workers"): (202, {"worker_id": "w1"}),
            ("GET", "/workers"): (200, {"workers": []}),
            ("GET", "/workers/w1"): (200, {"job_status": {"status": "failed", "message": ESCAPES}}),
        }
    )
    with Router(url) as router, pytest.raises(RouterError) as caught:
        router.add("http://10.231.1.2:30000", timeout=10)
    message = str(caught.value)
    assert "\x1b" not in message and "\x07" not in message and "\\x1b]0;pwned" in message
    assert "\u202e" not in message


def test_a_registration_answer_of_another_shape_is_a_router_error(stub) -> None:  # type: ignore[no-untyped-def]
    url = stub({("POST", "/workers"): (202, {"worker_id": ["not", "an", "id"]})})
    with Router(url) as router, pytest.raises(RouterError, match=r"POST /workers is not the 0\.3\.x shape"):
        router.add("http://10.231.1.2:30000", timeout=5)


def test_a_workers_load_is_read_bounded_and_wrong_answers_are_not_a_load(fault) -> None:  # type: ignore[no-untyped-def]
    from k26ctl.errors import K26Error
    from k26ctl.fleet.members import read_worker_load
    from k26ctl.httpsafe import DeadlineExceeded

    from .stub_worker import StubWorker

    worker = StubWorker()
    try:
        assert read_worker_load(worker.url) == 0  # SGLang's /get_load shape
    finally:
        worker.close()
    for mode in ("endless", "wrong-types", "deep-json"):  # neither endpoint usable: not known drained
        with pytest.raises(K26Error, match="neither /get_load nor /metrics"):
            read_worker_load(fault(mode))
    with pytest.raises(DeadlineExceeded):  # the caller counts this as "not serving"
        read_worker_load(fault("slow-body"))
