"""A small OpenAI-shaped HTTP server that misbehaves on request, for fault tests.

Runs on this machine (tests start it on 127.0.0.1) or inside the lab host as the service's program
(`python fault_server.py --port 30000 --mode hang`). It takes SGLang-style flags it does not need and
ignores them, so a rendered unit can launch it unchanged.

Modes: ok, hang (accepts, never answers), status500, malformed (200 with broken JSON), huge (a
multi-megabyte body), binary (random bytes), huge-text and binary-text (valid JSON whose completion
text is 4 MiB, or random code points with control characters and lone surrogates), die-after-N
(serves N completions, then exits hard), crash (exits 1 while loading).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

READY_LINE = "The server is fired up and ready to roll!"
CLEAN_TEXT = "The quick brown fox jumps over the lazy dog. Paris is the capital of France."


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
        text = "The answer is \ud800 ok"
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


class FaultHandler(BaseHTTPRequestHandler):
    server: FaultServer
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

    def _body(self) -> dict[str, object]:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            data = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            return {}
        return data if isinstance(data, dict) else {}

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

    def do_GET(self) -> None:
        if self._misbehave() or self._hostile():
            return
        if self.path.startswith("/health"):
            self._send(200, b"")
        elif self.path.startswith("/v1/models"):
            model = {"id": self.server.model, "object": "model", "owned_by": "fault-server"}
            self._send(200, json.dumps({"object": "list", "data": [model]}).encode())
        else:
            self._send(404, b'{"error": "not found"}')

    def do_POST(self) -> None:
        body = self._body()
        self.server.count_completion()
        if self._misbehave() or self._hostile():
            return
        time.sleep(self.server.completion_delay)
        text = completion_text(self.server.mode)
        if self.path.startswith("/v1/chat/completions"):
            choice: dict[str, object] = {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        elif self.path.startswith("/v1/completions"):
            choice = {"index": 0, "text": text, "finish_reason": "stop"}
        elif self.path.startswith("/generate"):
            self._send(200, json.dumps({"text": text, "meta_info": {"completion_tokens": 16}}).encode())
            return
        else:
            self._send(404, b'{"error": "not found"}')
            return
        payload = {
            "id": "x",
            "object": "chat.completion",
            "model": body.get("model", self.server.model),
            "choices": [choice],
            "usage": {"prompt_tokens": 8, "completion_tokens": 16, "total_tokens": 24},
        }
        self._send(200, json.dumps(payload).encode())


class FaultServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], mode: str, model: str) -> None:
        super().__init__(address, FaultHandler)
        self.mode = mode
        self.model = model
        self.hung = threading.Event()
        self.completion_delay = float(os.environ.get("FAULT_COMPLETION_DELAY", "0") or 0)
        self.completions = 0
        self.die_after = int(mode.split("-")[-1]) if mode.startswith("die-after-") else None
        self.sent_bytes = 0  # body bytes the endless mode managed to write
        if mode == "gzip-bomb":
            gzip_bomb()  # built before the first request, so building it never looks like a slow server
        self._lock = threading.Lock()

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client that hangs up mid-answer is what the hostile modes expect

    def count_completion(self) -> None:
        with self._lock:
            self.completions += 1
            if self.die_after is not None and self.completions > self.die_after:
                print("fault server: dying mid-run as asked", flush=True)
                os._exit(3)


def start_in_thread(mode: str, model: str = "fault-model", host: str = "127.0.0.1") -> FaultServer:
    """A server on a free port of `host`, served from a daemon thread; call .shutdown() to stop."""
    server = FaultServer((host, 0), mode, model)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


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
    print(f"fault server: loading for {args.load_seconds:g} s (mode {args.mode})", flush=True)
    time.sleep(args.load_seconds)
    if args.mode == "crash":
        print("fault server: fatal error while loading (mode crash)", file=sys.stderr, flush=True)
        return 1
    server = FaultServer((args.host, args.port), args.mode, args.served_model_name or args.model_path)
    print(READY_LINE, flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
