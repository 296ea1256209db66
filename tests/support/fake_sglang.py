"""A small SGLang-shaped HTTP server (stdlib only) that answers well or misbehaves on request.

In a test it runs on 127.0.0.1 from a thread: `with FakeSGLang(responder) as fake:` answers each
completion with what `responder(path, body)` returns (text, (content, reasoning), or a `Fault`), and
records requests and concurrency; `start_in_thread(mode)` starts one in a fault mode. On a lab host it
is the service's program (`python -m tests.support.fake_sglang --port 30000 --mode hang`): it takes the
SGLang flags it does not need and ignores them, so a rendered unit launches it unchanged.

Modes: ok, hang (accepts, never answers), status500, malformed (200 with broken JSON), huge (a
multi-megabyte body), binary (random bytes), huge-text and binary-text (valid JSON whose completion
text is 4 MiB, or random code points with control characters and lone surrogates), die-after-N (serves
N completions, then the process exits hard: for the program only), crash (the program exits 1 while
loading), and the HOSTILE_MODES below.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.support.serving import serve_in_thread

READY_LINE = "The server is fired up and ready to roll!"
CLEAN_TEXT = "The quick brown fox jumps over the lazy dog. Paris is the capital of France."


@dataclass
class Fault:
    """What a responder returns to make one request fail."""

    status: int = 500
    raw: bytes | None = None  # sent as the body instead of JSON (malformed responses)
    die: bool = False  # stop the whole server instead of answering


# responder(path, request_body) -> answer text, (content, reasoning_content), or a Fault
Responder = Callable[[str, dict[str, Any]], "str | tuple[str, str] | Fault"]


def completion_text(mode: str) -> str:
    """The answer text: clean, or (modes huge-text, binary-text) hostile yet valid JSON."""
    if mode == "huge-text":
        return (CLEAN_TEXT + " ") * (4 * 2**20 // (len(CLEAN_TEXT) + 1))  # about 4 MiB
    if mode == "binary-text":
        noise = os.urandom(64 * 1024).decode("latin-1")
        return "The answer is " + noise + "\x00\x1b[2J\ud800\udfff\ufffd" + noise
    return CLEAN_TEXT


# Modes that attack the client: the transport (slow, endless, compression bomb) or the answer's shape
# (wrong types, deep JSON, huge numbers, terminal escapes). `benchmarks/hostile_server.py` measures
# k26ctl's time and memory against each; tests/faults/test_hostile_modes.py checks its behaviour.
HOSTILE_MODES = (
    "slow-headers",
    "slow-body",
    "endless",
    "gzip-bomb",
    "wrong-types",
    "wrong-models",
    "huge-numbers",
    "deep-json",
    "escapes",
    "lone-surrogate",
    "dash-block",
)
ESCAPES = (
    "\x1b]0;pwned\x07\x1b[2J\x1b]52;c;cm0gLXJmIH4=\x07\x1b]8;;http://evil\x07link\x1b]8;;\x07\u202e[/][bold]x"
)

_BOMB: list[bytes] = []


def gzip_bomb(inflated: int = 1 << 30) -> bytes:
    """1 GiB of zeros gzipped (about 1 MB): 16 gzip members of 64 MiB each, built once per process."""
    if not _BOMB:
        import gzip

        member = gzip.compress(bytes(64 << 20), 9)
        _BOMB.append(member * (inflated // (64 << 20)))
    return _BOMB[0]


def hostile_answer(mode: str, path: str, model: str) -> object:
    """A JSON answer of the wrong shape (or with hostile content) for `path`; bytes when the JSON
    cannot be written by `json.dumps` (5,000-digit numbers, 100,000 levels of nesting)."""
    if path.startswith("/v1/models"):
        if mode == "wrong-models":
            return {"data": 5}
        if mode == "escapes":
            return {"object": "list", "data": [{"id": ESCAPES}]}
        return {"object": "list", "data": [{"id": model}]}
    if path.startswith(("/server_info", "/get_server_info")):
        if mode == "wrong-types":
            return {"version": ["x"], "internal_states": "x"}
        if mode == "escapes":
            return {"version": ESCAPES, "model_path": ESCAPES}
        return {"version": "0.0-fault"}
    text: object = CLEAN_TEXT
    tokens: object = 16
    meta: object = {"completion_tokens": 16}
    if mode == "wrong-types":
        tokens, meta = "abc", "x"
    elif mode == "huge-numbers":
        tokens, meta = "__BIG__", {"spec_accept_length": "__INF__", "completion_tokens": "__BIG__"}
    elif mode == "deep-json":
        return b'{"choices": ' + b"[" * 100_000 + b"]" * 100_000 + b', "text": "x"}'
    elif mode == "escapes":
        text = "The answer is " + ESCAPES
    elif mode == "lone-surrogate":
        # long enough that the detectors encode it (the compression ratio of the last 200 bytes)
        text = "The answer is \ud800 ok. " + " ".join([CLEAN_TEXT] * 4) + " \udfff"
    elif mode == "dash-block":
        text = "```\n" + "-" * 100_000 + "\n```"
    if path.startswith("/generate"):
        answer: object = {"text": text, "meta_info": meta}
    else:
        choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        answer = {
            "id": "x",
            "object": "chat.completion",
            "model": model,
            "choices": [choice],
            "usage": {"prompt_tokens": 8, "completion_tokens": tokens, "total_tokens": 24},
        }
    if mode == "huge-numbers":
        raw = json.dumps(answer).replace('"__BIG__"', "7" * 5000).replace('"__INF__"', "1e999")
        return raw.encode()
    return answer


class FakeSGLang(ThreadingHTTPServer):
    """The server. Options: `responder` (None: the mode's fixed text), `mode`, `model`, the speculative
    figures it reports (`accept_length` per /generate answer, `server_avg_accept` in /server_info;
    None leaves them out), `serves_server_info` (False: /server_info is a 404), `delay` before every
    answer, `completion_delay` before each completion, `api_key` (required as a Bearer token)."""

    daemon_threads = True

    def __init__(
        self,
        responder: Responder | None = None,
        *,
        mode: str = "ok",
        model: str = "fake-model",
        accept_length: float | None = 3.5,
        server_avg_accept: float | None = 3.4,
        serves_server_info: bool = True,
        delay: float = 0.0,
        completion_delay: float = 0.0,
        api_key: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        super().__init__((host, port), _Handler)
        self.responder = responder
        self.mode = mode
        self.model = model
        self.accept_length = accept_length
        self.server_avg_accept = server_avg_accept
        self.serves_server_info = serves_server_info
        self.delay = delay
        self.completion_delay = completion_delay
        self.api_key = api_key
        self.hung = threading.Event()  # set to release handlers held by `hang` and the hostile modes
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.completions = 0
        self.die_after = int(mode.split("-")[-1]) if mode.startswith("die-after-") else None
        self.sent_bytes = 0  # body bytes the endless mode managed to write
        if mode == "gzip-bomb":
            gzip_bomb()  # built before the first request, so building it never looks like a slow server
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def start(self) -> FakeSGLang:
        self._thread = serve_in_thread(self)
        return self

    def stop(self) -> None:
        self.hung.set()
        self.shutdown()
        self.server_close()

    def __enter__(self) -> FakeSGLang:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client that hangs up mid-answer is what the hostile modes expect

    def count_completion(self) -> None:
        with self._lock:
            self.completions += 1
            if self.die_after is not None and self.completions > self.die_after:
                print("fake sglang: dying mid-run as asked", flush=True)
                os._exit(3)

    def track(self, path: str, body: dict[str, Any], change: int) -> None:
        with self._lock:
            if change > 0:
                self.requests.append((path, body))
            self.in_flight += change
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def die(self) -> None:
        # shutdown() blocks until serve_forever returns; run it off the handler thread
        threading.Thread(target=self.stop, daemon=True).start()

    def server_info(self) -> dict[str, Any]:
        info: dict[str, Any] = {
            "version": "0.5.15-fake",
            "model_path": self.model,
            "speculative_algorithm": "DDTREE",
            "internal_states": [{}],
        }
        if self.server_avg_accept is not None:
            info["internal_states"][0]["avg_spec_accept_length"] = self.server_avg_accept
        return info


class _Handler(BaseHTTPRequestHandler):
    server: FakeSGLang
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.wfile.write(body)

    def _send_json(self, payload: object) -> None:
        self._send(200, json.dumps(payload).encode())

    def _body(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            data = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            return {}
        return data if isinstance(data, dict) else {}

    def do_GET(self) -> None:
        self._serve({}, completion=False)

    def do_POST(self) -> None:
        body = self._body()
        self.server.count_completion()
        self._serve(body, completion=True)

    def _serve(self, body: dict[str, Any], *, completion: bool) -> None:
        server = self.server
        if server.api_key and self.headers.get("Authorization") != f"Bearer {server.api_key}":
            self._send(401, b'{"error": "unauthorized"}')
            return
        server.track(self.path, body, +1)
        try:
            if self._misbehave() or self._hostile():
                return
            if server.delay:
                time.sleep(server.delay)
            if completion:
                self._complete(body)
            else:
                self._info()
        finally:
            server.track(self.path, body, -1)

    def _info(self) -> None:
        server = self.server
        if self.path.startswith("/health"):
            self._send(200, b"")
        elif self.path.startswith("/v1/models"):
            model = {"id": server.model, "object": "model", "owned_by": "fake-sglang"}
            self._send_json({"object": "list", "data": [model]})
        elif self.path.startswith(("/server_info", "/get_server_info")) and server.serves_server_info:
            self._send_json(server.server_info())
        else:
            self._send(404, b'{"detail": "Not Found"}')

    def _complete(self, body: dict[str, Any]) -> None:
        server = self.server
        if not self.path.startswith(("/v1/chat/completions", "/v1/completions", "/generate")):
            self._send(404, b'{"detail": "Not Found"}')
            return
        time.sleep(server.completion_delay)
        answer = (
            completion_text(server.mode) if server.responder is None else server.responder(self.path, body)
        )
        if isinstance(answer, Fault):
            self._fail(answer)
            return
        text, reasoning = answer if isinstance(answer, tuple) else (answer, None)
        tokens = max(1, (len(text) + len(reasoning or "")) // 4)
        if self.path.startswith("/generate"):
            meta: dict[str, Any] = {"completion_tokens": tokens, "finish_reason": {"type": "length"}}
            if server.accept_length is not None:
                meta["spec_accept_length"] = server.accept_length
                meta["spec_verify_ct"] = max(1, int(tokens / server.accept_length))
            self._send_json({"text": text, "meta_info": meta})
            return
        if self.path.startswith("/v1/completions"):
            choice: dict[str, Any] = {"index": 0, "text": text, "finish_reason": "stop"}
        else:
            message = {"role": "assistant", "content": text, "reasoning_content": reasoning}
            choice = {"index": 0, "message": message, "finish_reason": "stop"}
        self._send_json(
            {
                "id": "x",
                "object": "chat.completion",
                "model": body.get("model") or server.model,
                "choices": [choice],
                "usage": {"prompt_tokens": 5, "completion_tokens": tokens, "total_tokens": tokens + 5},
            }
        )

    def _fail(self, fault: Fault) -> None:
        if fault.die:
            self.server.die()
            self.close_connection = True
            self.wfile.flush()
            self.connection.shutdown(2)
            return
        self._send(fault.status, fault.raw if fault.raw is not None else b'{"error": "boom"}')

    def _misbehave(self) -> bool:
        mode = self.server.mode
        if mode == "hang":
            self.server.hung.wait()
            return True
        if mode == "status500":
            self._send(500, b'{"error": "internal"}')
            return True
        if mode == "malformed":
            self._send(200, b'{"object": "list", "data": [{"id": ')
            return True
        if mode == "huge":
            self._send(200, b'{"pad": "' + b"A" * (8 * 2**20) + b'"}')
            return True
        if mode == "binary":
            self._send(200, os.urandom(2**20), "application/octet-stream")
            return True
        return False

    def _hostile(self) -> bool:
        """The hostile modes (HOSTILE_MODES): transport abuse and wrong shapes; False when not one."""
        mode = self.server.mode
        if mode not in HOSTILE_MODES:
            return False
        stop = self.server.hung
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            if mode == "slow-headers":  # one header byte every half second, never finishing
                for byte in b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Pad: " + b"a" * 10_000:
                    if stop.wait(0.5):
                        break
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                self.close_connection = True
            elif mode == "slow-body":  # valid headers, then one body byte every half second
                self._start(200, {"Content-Length": str(10_000)})
                for _ in range(10_000):
                    if stop.wait(0.5):
                        break
                    self.wfile.write(b" ")
                    self.wfile.flush()
                self.close_connection = True
            elif mode == "endless":  # a body without end, as fast as the socket takes it (capped at 60 s)
                self._start(200, {"Transfer-Encoding": "chunked"})
                chunk = b"%x\r\n%s\r\n" % (1 << 16, b"A" * (1 << 16))
                ends = time.monotonic() + 60
                while time.monotonic() < ends and not stop.is_set():
                    self.wfile.write(chunk)
                    self.server.sent_bytes += len(chunk)
                self.close_connection = True
            elif mode == "gzip-bomb":  # about 1 MB on the wire, 1 GiB once inflated
                bomb = gzip_bomb()
                self._start(200, {"Content-Encoding": "gzip", "Content-Length": str(len(bomb))})
                self.wfile.write(bomb)
            else:
                answer = hostile_answer(mode, self.path, self.server.model)
                self._send(200, answer if isinstance(answer, bytes) else json.dumps(answer).encode())
        return True

    def _start(self, status: int, headers: dict[str, str]) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.flush()


def start_in_thread(mode: str, model: str = "fault-model", host: str = "127.0.0.1") -> FakeSGLang:
    """A server in fault mode `mode` on a free port of `host`, served from a daemon thread, reporting no
    speculative figures and no /server_info (a plain OpenAI-style server); stop it with .stop()."""
    server = FakeSGLang(
        mode=mode,
        model=model,
        accept_length=None,
        server_avg_accept=None,
        serves_server_info=False,
        host=host,
    )
    return server.start()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="0.0.0.0")
    parser.add_argument("--port", type=int, default=30000)
    parser.add_argument("--mode", default=os.environ.get("FAULT_MODE", "ok"))
    parser.add_argument("--served-model-name", default=None)
    parser.add_argument("--model-path", default="fault-model")
    parser.add_argument(
        "--load-seconds", type=float, default=float(os.environ.get("FAULT_LOAD_SECONDS", "0"))
    )
    args, _ignored = parser.parse_known_args(argv)
    print(f"fake sglang: loading for {args.load_seconds:g} s (mode {args.mode})", flush=True)
    time.sleep(args.load_seconds)
    if args.mode == "crash":
        print("fake sglang: fatal error while loading (mode crash)", file=sys.stderr, flush=True)
        return 1
    server = FakeSGLang(
        mode=args.mode,
        model=args.served_model_name or args.model_path,
        accept_length=None,
        server_avg_accept=None,
        serves_server_info=False,
        completion_delay=float(os.environ.get("FAULT_COMPLETION_DELAY", "0") or 0),
        host=args.host,
        port=args.port,
    )
    print(READY_LINE, flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
