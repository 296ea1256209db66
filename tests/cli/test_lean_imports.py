"""The k26ctl process keeps httpx's command-line client and trio out, and httpx still works.

Each case runs in a fresh interpreter: the point is what an import does to `sys.modules`."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

_CODE = """
import json, sys, threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from k26ctl.cli.lean_imports import keep_unused_imports_out
if sys.argv[1] == "lean":
    keep_unused_imports_out()
import httpx

class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")
    def log_message(self, *args):
        pass

server = HTTPServer(("127.0.0.1", 0), Handler)
threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
with httpx.Client(timeout=10) as client:
    body = client.get(f"http://127.0.0.1:{server.server_port}/").text
server.shutdown()
heavy = [m for m in ("click", "pygments.lexers", "rich.progress", "trio._core") if m in sys.modules]
print(json.dumps({"body": body, "heavy": heavy}))
"""


def _run(mode: str) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-c", _CODE, mode], capture_output=True, text=True, timeout=60, cwd=ROOT, check=True
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_httpx_works_without_its_cli_and_trio() -> None:
    assert _run("lean") == {"body": "ok", "heavy": []}


def test_without_it_httpx_loads_its_cli() -> None:
    # the check above can fail: on this machine plain httpx pulls its CLI in
    if not all(importlib.util.find_spec(m) for m in ("click", "pygments", "rich")):
        pytest.skip("httpx's CLI dependencies are not installed here")
    assert "rich.progress" in _run("plain")["heavy"]
