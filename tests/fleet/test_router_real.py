"""The router adapter against the real sglang-router 0.3.2 on loopback (workers are small stubs)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from k26ctl.fleet.model import OwnedRouter
from k26ctl.fleet.router import Router, RouterError
from k26ctl.fleet.router_process import start_router, stop_router
from tests.support.ports import free_port, refused_port

from .stub_worker import StubWorker

pytest.importorskip("sglang_router")


@pytest.fixture(scope="module")
def router_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    owned = OwnedRouter(port=free_port(), prometheus_port=free_port(), health_check_interval_secs=1)
    proc = start_router(owned, tmp_path_factory.mktemp("router") / "router.log")
    try:
        yield f"http://127.0.0.1:{owned.port}"
    finally:
        stop_router(proc.pid)


@pytest.fixture
def router(router_url: str) -> Iterator[Router]:
    with Router(router_url) as r:
        yield r
        for w in r.workers():  # leave the shared router empty for the next test
            r.remove(w.url)


def test_the_router_binds_only_where_told_and_starts_with_no_workers(router: Router) -> None:
    assert router.workers() == []
    assert router.alive()


def test_add_waits_for_listed_and_healthy_then_remove_confirms_gone(router: Router) -> None:
    worker = StubWorker()
    try:
        added = router.add(worker.url, timeout=20)
        assert added.healthy and added.url == worker.url
        assert router.find(worker.url + "/") == added  # a trailing slash is the same worker
        assert router.remove(worker.url) is True
        assert router.find(worker.url) is None
        assert router.remove(worker.url) is False  # not listed: nothing to do
        again = router.add(worker.url, timeout=20)
        assert again.id != added.id  # a new registration gets a new UUID: always look it up by URL
    finally:
        worker.close()


def test_a_loading_worker_is_admitted_only_once_its_health_turns_200(router: Router) -> None:
    worker = StubWorker(health=503)
    timer = threading.Timer(1.5, lambda: setattr(worker, "health", 200))
    timer.start()
    try:
        t0 = time.monotonic()
        added = router.add(worker.url, timeout=30)
        assert added.healthy and time.monotonic() - t0 >= 1.4
    finally:
        timer.cancel()
        worker.close()


def test_a_worker_that_never_answers_is_an_error_not_a_202(router: Router) -> None:
    with refused_port() as port, pytest.raises(RouterError):
        router.add(f"http://127.0.0.1:{port}", timeout=3)


def test_traffic_stops_reaching_a_removed_worker(router: Router, router_url: str) -> None:
    a, b = StubWorker(), StubWorker()
    try:
        router.add(a.url, timeout=20)
        router.add(b.url, timeout=20)
        router.remove(a.url)
        before = a.chats
        for _ in range(6):
            r = httpx.post(
                f"{router_url}/v1/chat/completions",
                json={"model": "stub", "messages": [{"role": "user", "content": "hi"}]},
                timeout=10,
            )
            assert r.status_code == 200
        assert a.chats == before and b.chats >= 6
    finally:
        a.close()
        b.close()


def test_an_unreachable_router_is_exit_69(tmp_path: Path) -> None:
    with refused_port() as port, Router(f"http://127.0.0.1:{port}", timeout=1) as dead:
        with pytest.raises(Exception) as info:
            dead.workers()
        assert getattr(info.value, "exit_code", None) == 69


def test_a_router_with_an_admin_key_refuses_the_adapter_without_it(tmp_path: Path) -> None:
    owned = OwnedRouter(
        port=free_port(),
        prometheus_port=free_port(),
        extra_args=["--control-plane-api-keys", "k1:ops:admin:s3cret"],
    )
    proc = start_router(owned, tmp_path / "router.log")
    worker = StubWorker()
    try:
        url = f"http://127.0.0.1:{owned.port}"
        with Router(url) as anonymous, pytest.raises(RouterError) as refused:
            anonymous.workers()
        assert refused.value.exit_code == 77 and "admin_key_env" in (refused.value.hint or "")
        with Router(url, admin_key="s3cret") as admin:
            assert admin.add(worker.url, timeout=20).healthy
            assert admin.remove(worker.url)
    finally:
        worker.close()
        stop_router(proc.pid)
