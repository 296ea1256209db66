"""A tiny SGLang-shaped HTTP server on 127.0.0.1 for runner tests (stdlib http.server).

It answers /v1/models, /server_info, /v1/chat/completions and /generate with canned bodies produced
by a `responder` callback, and can fail on purpose: HTTP 500, malformed JSON, or closing the
listening socket mid-suite (the server "dies").
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# responder(path, request_body) -> answer text, (content, reasoning_content), or a Fault
Responder = Callable[[str, dict[str, Any]], "str | tuple[str, str] | Fault"]


@dataclass
class Fault:
    status: int = 500
    raw: bytes | None = None  # sent as the body instead of JSON (malformed responses)
    die: bool = False  # shut the whole server down instead of answering


@dataclass
class FakeSGLang:
    responder: Responder
    model: str = "fake-model"
    accept_length: float | None = 3.5
    server_avg_accept: float | None = 3.4
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0
    delay: float = 0.0
    api_key: str | None = None

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, payload: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_GET(self) -> None:
                fake._handle(self, "GET", {})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                fake._handle(self, "POST", body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> FakeSGLang:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _die(self) -> None:
        # shutdown() blocks until serve_forever returns; run it off the handler thread
        threading.Thread(target=self.stop, daemon=True).start()

    def _handle(self, h: Any, method: str, body: dict[str, Any]) -> None:
        import time

        path = h.path
        if self.api_key and h.headers.get("Authorization") != f"Bearer {self.api_key}":
            h._send(401, b'{"error": "unauthorized"}')
            return
        with self._lock:
            self.requests.append((path, body))
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.delay:
                time.sleep(self.delay)
            if path == "/v1/models":
                h._send(200, json.dumps({"object": "list", "data": [{"id": self.model}]}).encode())
                return
            if path in ("/server_info", "/get_server_info"):
                info: dict[str, Any] = {
                    "version": "0.5.15-fake",
                    "model_path": self.model,
                    "speculative_algorithm": "DDTREE",
                    "internal_states": [{}],
                }
                if self.server_avg_accept is not None:
                    info["internal_states"][0]["avg_spec_accept_length"] = self.server_avg_accept
                h._send(200, json.dumps(info).encode())
                return
            if path not in ("/v1/chat/completions", "/generate"):
                h._send(404, b'{"detail": "Not Found"}')
                return
            answer = self.responder(path, body)
            if isinstance(answer, Fault):
                if answer.die:
                    self._die()
                    h.close_connection = True
                    h.wfile.flush()
                    h.connection.shutdown(2)
                    return
                h._send(answer.status, answer.raw if answer.raw is not None else b'{"error": "boom"}')
                return
            reasoning = None
            if isinstance(answer, tuple):
                answer, reasoning = answer
            tokens = max(1, (len(answer) + len(reasoning or "")) // 4)
            if path == "/generate":
                meta: dict[str, Any] = {"completion_tokens": tokens, "finish_reason": {"type": "length"}}
                if self.accept_length is not None:
                    meta["spec_accept_length"] = self.accept_length
                    meta["spec_verify_ct"] = max(1, int(tokens / self.accept_length))
                h._send(200, json.dumps({"text": answer, "meta_info": meta}).encode())
                return
            reply = {
                "id": "x",
                "object": "chat.completion",
                "model": self.model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": answer, "reasoning_content": reasoning},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 5, "completion_tokens": tokens, "total_tokens": tokens + 5},
            }
            h._send(200, json.dumps(reply).encode())
        finally:
            with self._lock:
                self.in_flight -= 1
