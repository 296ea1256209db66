"""Fixtures shared by the fleet tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.fake_sglang import FakeSGLang, start_in_thread


@pytest.fixture
def fault() -> Iterator[object]:
    """start(mode) -> the URL of a fake SGLang server in fault mode `mode` (stopped after the test)."""
    servers: list[FakeSGLang] = []

    def start(mode: str) -> str:
        server = start_in_thread(mode)
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.hung.set()
        server.shutdown()
