"""The SMG adapter and the roll against the real `smg` 1.13.0 on loopback (workers are small stubs)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from k26ctl.fleet import record as rec
from k26ctl.fleet.gateway import detect_kind
from k26ctl.fleet.model import OwnedRouter
from k26ctl.fleet.record import LocalStore
from k26ctl.fleet.roll import ApplyOutcome, Roll, RollOptions
from k26ctl.fleet.router_process import start_router, stop_router
from k26ctl.fleet.smg import SMG_VERSION, SmgGateway
from tests.support.ports import free_port

from .stub_worker import StubWorker

pytest.importorskip("smg")

GARBAGE = "!!!!!!!!!!!!!!!!!!!!!!!!"


@pytest.fixture(scope="module")
def smg_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    # probes every second, one failure or success flips a worker: SMG's re-admission is seen at once
    owned = OwnedRouter(
        port=free_port(),
        prometheus_port=free_port(),
        health_check_interval_secs=1,
        health_failure_threshold=1,
        health_success_threshold=1,
    )
    proc = start_router(owned, tmp_path_factory.mktemp("smg") / "smg.log", kind="smg")
    try:
        yield f"http://127.0.0.1:{owned.port}"
    finally:
        stop_router(proc.pid)


@pytest.fixture
def smg(smg_url: str) -> Iterator[SmgGateway]:
    with SmgGateway(smg_url) as gateway:
        yield gateway
        for w in gateway.workers():  # leave the shared gateway empty for the next test
            gateway.remove(w.url)


@pytest.fixture
def stubs() -> Iterator[Callable[[], StubWorker]]:
    made: list[StubWorker] = []

    def make() -> StubWorker:
        made.append(StubWorker())
        return made[-1]

    yield make
    for stub in made:
        stub.close()


def chat(url: str) -> str:
    body = {"model": "stub", "messages": [{"role": "user", "content": "hi"}]}
    response = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=30)
    response.raise_for_status()
    return str(response.json()["choices"][0]["message"]["content"])


def test_the_gateway_says_it_is_smg_at_the_checked_version(smg: SmgGateway, smg_url: str) -> None:
    assert smg.workers() == []
    assert smg.version() == f"smg-{SMG_VERSION}"
    assert detect_kind(smg_url) == "smg"


def test_add_waits_for_ready_and_remove_leaves_no_entry(smg: SmgGateway, stubs: Any) -> None:
    stub = stubs()
    added = smg.add(stub.url, timeout=20, settings={"priority": 80, "labels": {"zone": "a"}})
    assert added.healthy and added.status == "ready" and added.priority == 80
    assert added.labels is not None and added.labels["zone"] == "a"
    assert smg.add(stub.url, timeout=5).id == added.id  # already listed (SMG answers 409): the same worker
    assert smg.remove(stub.url) is True
    assert smg.find(stub.url) is None  # not even a draining entry is left
    assert smg.remove(stub.url) is False


def test_take_out_holds_smgs_drain_window_with_its_own_count(
    smg: SmgGateway, stubs: Any, smg_url: str
) -> None:
    stub = stubs()
    smg.add(stub.url, timeout=20, settings={"priority": 70, "labels": {"zone": "b"}})
    stub.delay = 12.0  # well past SMG's default 5 s drain window, even when the two arrive apart
    running = [threading.Thread(target=chat, args=(smg_url,)) for _ in range(2)]
    for thread in running:
        thread.start()
    # both requests must be running on the worker before it is taken out (on a loaded machine SMG may
    # take seconds to route them; taken out idle, the drain would end at once and there is no count)
    deadline = time.monotonic() + 20
    while stub.running < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert stub.running == 2
    t0 = time.monotonic()
    kept = smg.take_out(stub.url, timeout=10, settle=60)
    assert kept == {"priority": 70, "cost": 1.0}  # labels stay SMG's to discover again
    listed = smg.find(stub.url)
    assert listed is not None and listed.draining and not listed.healthy
    assert smg.in_flight(stub.url) == 2
    time.sleep(max(0.0, 5.5 - (time.monotonic() - t0)))
    assert smg.in_flight(stub.url) == 2  # past the default window: the window k26ctl set holds
    for thread in running:
        thread.join(25)
    assert smg.in_flight(stub.url) == 0
    assert smg.remove(stub.url) is True  # ends the window at once
    assert smg.find(stub.url) is None


def test_a_member_put_back_outlives_the_removal_job_of_its_take_out(smg: SmgGateway, stubs: Any) -> None:
    """SMG's first removal job wakes at the end of its window and removes whatever is registered at
    the URL then: `add` registers again only past that point, so the new entry stays."""
    stub = stubs()
    first = smg.add(stub.url, timeout=20)
    t0 = time.monotonic()
    smg.take_out(stub.url, settle=3)
    assert smg.in_flight(stub.url) == 0
    assert smg.remove(stub.url) is True  # the window ended early: no entry while "deploying"
    again = smg.add(stub.url, timeout=20)
    assert again.id != first.id and time.monotonic() - t0 >= 3.0
    time.sleep(2.0)  # past the removal job's wake-up
    listed = smg.find(stub.url)
    assert listed is not None and listed.id == again.id and listed.healthy


class StubMember:
    """`MemberOps` for a stub worker: its deploy restarts it (health 503, then 200) into `answer`."""

    def __init__(self, name: str, stub: StubWorker, *, answer: str | None, ok: bool) -> None:
        self.name, self.url, self.fingerprint = name, stub.url, "target"
        self.stub, self.answer, self.ok = stub, answer, ok
        self.pending_left = True

    def pending(self) -> bool:
        return self.pending_left

    def load(self) -> int | None:
        return self.stub.running

    def apply(self) -> ApplyOutcome:
        self.stub.health = 503  # the restart
        time.sleep(2.0)  # SMG's checker (1 s) would mark it not ready, were it still registered
        self.stub.answer, self.stub.health = self.answer, 200  # up again, /health 200 behind garbage
        time.sleep(3.0)  # long enough for SMG's checker to have put it back, were it registered
        self.pending_left = False
        if self.ok:
            return ApplyOutcome(True, "new", "deployed, smoke passed")
        return ApplyOutcome(False, "new", "smoke failed: degenerate output ('!' repeated)")

    def note(self, entry: dict[str, Any]) -> None:
        pass

    def close(self) -> None:
        pass


def test_smg_re_admits_a_restarted_worker_on_health_alone(smg: SmgGateway, stubs: Any, smg_url: str) -> None:
    """What a roll must not leave to SMG: a registered worker that restarts into garbage is routed to
    again as soon as /health answers."""
    stub = stubs()
    smg.add(stub.url, timeout=20)
    stub.health = 503
    wait_for(lambda: (w := smg.find(stub.url)) is not None and not w.healthy, "SMG to mark it down")
    stub.answer, stub.health = GARBAGE, 200
    wait_for(lambda: (w := smg.find(stub.url)) is not None and w.healthy, "SMG to route to it again")
    assert chat(smg_url) == GARBAGE


def test_a_roll_keeps_the_garbage_canary_out_of_smg_and_halts(
    smg: SmgGateway, stubs: Any, smg_url: str, tmp_path: Path
) -> None:
    canary, a, b = stubs(), stubs(), stubs()
    for stub in (canary, a, b):
        smg.add(stub.url, timeout=20)
    members = [
        StubMember("m1", canary, answer=GARBAGE, ok=False),
        StubMember("m2", a, answer=None, ok=True),
        StubMember("m3", b, answer=None, ok=True),
    ]
    answers: list[str] = []
    failures: list[str] = []
    canary_routable: list[float] = []
    stop = threading.Event()

    def clients() -> None:
        for _ in range(2000):  # bounded: count and the roll's end
            if stop.is_set():
                return
            try:
                answers.append(chat(smg_url))
            except httpx.HTTPError as exc:
                failures.append(str(exc))
            time.sleep(0.05)

    def watch() -> None:
        while not stop.wait(0.2):
            listed = smg.find(canary.url)
            if listed is not None and listed.healthy and rolled.is_set():
                canary_routable.append(time.monotonic())

    rolled = threading.Event()  # set once the roll took the canary out
    threads = [threading.Thread(target=clients), threading.Thread(target=watch)]
    for thread in threads:
        thread.start()

    def on_event(event: Any) -> None:
        if event.member == "m1" and event.data.get("phase") == rec.DRAINING:
            rolled.set()

    try:
        with SmgGateway(smg_url) as gateway:
            roll = Roll(
                "smgtest",
                list(members),
                gateway,
                RollOptions(soak=1.0, poll=0.2, sync_interval=0.5, drain_timeout=30),
                LocalStore("smgtest", root=tmp_path),
                on_event,
            )
            result = roll.run()
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
    assert result.status == rec.HALTED and result.exit_code == 1
    assert "canary m1 failed" in result.record.reason
    assert result.record.members["m1"].phase == rec.FAILED
    assert result.record.members["m2"].phase == rec.OLD and result.record.members["m3"].phase == rec.OLD
    assert rolled.is_set() and canary_routable == []  # never back in SMG's pool after the take-out
    assert smg.find(canary.url) is None  # halted: the failed canary stays out, with no entry to revive
    assert failures == [] and answers and GARBAGE not in answers
    assert canary.health == 200 and canary.answer == GARBAGE  # the member did come back, garbage


def wait_for(check: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() >= deadline:
            pytest.fail(f"waited {timeout:g} s for {what}")
        time.sleep(0.1)


def test_status_shows_smgs_view_of_each_member_beside_k26ctls(
    smg: SmgGateway, stubs: Any, smg_url: str, tmp_path: Path
) -> None:
    from k26ctl.resources import profiles_dir
    from tests.support.cli import run_k26ctl

    first, second = stubs(), stubs()
    smg.add(first.url, timeout=20, settings={"priority": 60})
    smg.add(second.url, timeout=20, settings={"priority": 60})
    first.delay = second.delay = 5.0
    sender = threading.Thread(target=chat, args=(smg_url,))
    sender.start()
    wait_for(lambda: first.running + second.running == 1, "a request in flight")
    busy, idle = (first, second) if first.running else (second, first)
    smg.take_out(busy.url, settle=30)  # SMG keeps counting the request the busy one still runs
    path = tmp_path / "fleet.yaml"
    path.write_text(
        f"""fleet:
  name: smgstatus
  profile: {profiles_dir() / "lab" / "ddtree-b7.yaml"}
  router: {{url: "{smg_url}"}}
  members:
    - {{name: a, url: "{busy.url}", set: [host.address=a.invalid]}}
    - {{name: b, url: "{idle.url}", set: [host.address=b.invalid]}}
    - {{name: c, url: "http://127.0.0.1:9", set: [host.address=c.invalid]}}
"""
    )
    proc = run_k26ctl("status", str(path), env={"XDG_STATE_HOME": str(tmp_path)})
    sender.join(15)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith(f"fleet smgstatus: smg (detected) {smg_url}: 1/2 worker(s) routed to")
    assert "smg: draining, load 1" in lines[1] and "k26ctl: no roll recorded" in lines[1]
    assert "smg: ready, load 0, priority 60" in lines[2]
    assert "smg: not listed  k26ctl: no roll recorded" in lines[3]
