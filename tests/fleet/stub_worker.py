"""A minimal SGLang-shaped worker for the router adapter's tests: /health answers as told (503 then
200 to mimic a loading server), /get_load as SGLang's, chat answers name the worker (or say
`answer`, after `delay` seconds)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.support.serving import serve_in_thread


class StubWorker:
    def __init__(self, health: int = 200) -> None:
        self.health = health
        self.chats = 0
        self.answer: str | None = None  # the chat content instead of the worker's URL (garbage, say)
        self.delay = 0.0  # seconds each chat takes
        self.running = 0  # chats being answered now
        self._lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _json(self, code: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path == "/health":
                    self._json(stub.health, {})
                elif self.path == "/get_load":
                    self._json(200, [{"dp_rank": 0, "num_reqs": stub.running, "num_waiting_reqs": 0}])
                elif self.path in ("/server_info", "/model_info", "/get_model_info"):
                    self._json(200, {"model_path": "stub"})
                elif self.path == "/v1/models":
                    self._json(200, {"data": [{"id": "stub"}]})
                else:
                    self._json(404, {})

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length", 0)))
                stub.chats += 1
                with stub._lock:
                    stub.running += 1
                try:
                    time.sleep(stub.delay)
                    self._answer()
                finally:
                    with stub._lock:
                        stub.running -= 1

            def _answer(self) -> None:
                self._json(
                    200,
                    {
                        "id": "c",
                        "object": "chat.completion",
                        "model": "stub",
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": stub.answer or stub.url},
                                "finish_reason": "stop",
                            }
                        ],
                    },
                )

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        serve_in_thread(self.server)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
