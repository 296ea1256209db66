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

    def do_GET(self) -> None:
        if self._misbehave():
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
        if self._misbehave():
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
        self._lock = threading.Lock()

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
