"""Every bounded HTTP client shares one verifying TLS context instead of loading the CA bundle anew."""

from __future__ import annotations

import ssl
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from k26ctl.httpsafe import BoundedClient, deadline_transport, shared_tls_context
from tests.support.serving import serve_in_thread


def _pool_context(client: BoundedClient) -> Any:
    return client._http._transport._pool._ssl_context  # type: ignore[attr-defined]


def test_clients_share_one_context_and_it_still_verifies() -> None:
    with BoundedClient("http://127.0.0.1:1") as a, BoundedClient("https://127.0.0.1:1") as b:
        assert _pool_context(a) is _pool_context(b) is shared_tls_context()
    context = shared_tls_context()
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname
    assert context.get_ca_certs() or context.cert_store_stats()["x509_ca"] > 0


def test_an_explicit_verify_is_kept() -> None:
    unverified = httpx.create_ssl_context(verify=False)
    transport = deadline_transport(verify=unverified)
    assert transport._pool._ssl_context is unverified
    transport.close()


def test_a_plain_http_request_works_through_the_shared_transport() -> None:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    serve_in_thread(server)
    try:
        for _ in range(3):
            with BoundedClient(f"http://127.0.0.1:{server.server_port}", timeout=5) as client:
                answer = client.request("GET", "/health")
                assert (answer.status_code, answer.body) == (200, b"ok")
    finally:
        server.shutdown()
        server.server_close()
