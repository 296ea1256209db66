"""The roll's decisions against a fake router and fake hosts (fast; the lab tests run the real ones)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from k26ctl.errors import Interrupted, UsageError
from k26ctl.fleet import record as rec
from k26ctl.fleet.record import LocalStore
from k26ctl.fleet.roll import Roll, RollEvent, RollOptions, RollResult

from .fakes import FakeMember, FakeRouter


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += max(seconds, 0.01)


def make(
    tmp_path: Path, n: int = 3, **opts: Any
) -> tuple[FakeRouter, list[FakeMember], LocalStore, dict[str, Any]]:
    router = FakeRouter()
    members = [FakeMember(f"h{i}", f"http://10.0.0.{i}:30000", router=router) for i in range(1, n + 1)]
    for m in members:
        router.add(m.url)
    router.log.clear()
    store = LocalStore("f", root=tmp_path)
    options = {"soak": 1.0, "poll": 0.1, "sync_interval": 3600.0, **opts}
    return router, members, store, options


def run(
    router: FakeRouter,
    members: list[FakeMember],
    store: LocalStore,
    events: list[RollEvent] | None = None,
    **opts: Any,
) -> RollResult:
    clock = Clock()
    roll = Roll(
        "f",
        list(members),  # a list of the MemberOps protocol: same members, Roll never changes the list
        router,
        RollOptions(**opts),
        store,
        on_event=(events.append if events is not None else None),
        sleep=clock.sleep,
        clock=clock,
    )
    return roll.run()


def test_good_roll_takes_each_member_out_drains_deploys_and_puts_it_back(tmp_path: Path) -> None:
    router, members, store, opts = make(tmp_path)
    result = run(router, members, store, **opts)
    assert result.exit_code == 0 and result.status == rec.DONE
    assert result.order == ["h1", "h2", "h3"]
    # one member at a time: remove, then add, before the next one is touched
    assert router.log == [(op, m.url) for m in members for op in ("remove", "add")]
    for m in members:
        assert m.listed_while_applying is False
        assert m.calls.index("load") < m.calls.index("apply")
        assert [n["phase"] for n in m.notes] == [rec.DRAINING, rec.VERIFIED, rec.NEW]
    assert {s.phase for s in result.record.members.values()} == {rec.NEW}
    assert set(router.listed) == {m.url for m in members}
    stored = store.load()
    assert stored is not None and stored.status == rec.DONE
    assert (tmp_path / "runs.jsonl").read_text().count("\n") == 1


def test_members_already_at_the_target_are_not_touched(tmp_path: Path) -> None:
    router, members, store, opts = make(tmp_path)
    members[1].changes = False
    result = run(router, members, store, **opts)
    assert result.order == ["h1", "h3"]
    assert ("remove", members[1].url) not in router.log
    assert result.record.members["h2"].detail == "already at the target"


def test_canary_failing_smoke_halts_and_stays_out_while_the_others_keep_serving_old(tmp_path: Path) -> None:
    router, members, store, opts = make(tmp_path)
    members[0].smoke_ok = False
    result = run(router, members, store, **opts)
    assert result.exit_code == 1 and result.status == rec.HALTED
    assert "canary h1 failed" in result.record.reason and "!!!!" in result.record.reason
    assert members[0].url not in router.listed
    assert members[1].url in router.listed and members[2].url in router.listed
    assert "apply" not in members[1].calls and "apply" not in members[2].calls
    where = result.where()
    assert where["h1"] == "failed, out of router (new config)"
    assert where["h2"] == where["h3"] == "old config, serving"


def test_a_halted_roll_must_be_resumed_and_resume_finishes_it(tmp_path: Path) -> None:
    router, members, store, opts = make(tmp_path)
    members[0].smoke_ok = False
    run(router, members, store, **opts)
    with pytest.raises(UsageError, match="is halted: canary h1 failed") as refused:
        run(router, members, store, **opts)
    assert "--resume" in (refused.value.hint or "")
    assert members[0].url not in router.listed  # refusing did not re-admit the failed member
    members[0].smoke_ok = True  # the fix
    members[0].changes = True
    router.log.clear()
    result = run(router, members, store, resume=True, **opts)
    assert result.status == rec.DONE and result.order[0] == "h1"
    assert set(router.listed) == {m.url for m in members}
    # the failed member was out already: it is not removed again before its deploy
    assert router.log.count(("remove", members[0].url)) == 0
    with pytest.raises(UsageError, match="no halted roll"):
        run(router, members, store, resume=True, **opts)


def test_min_healthy_refuses_before_touching_anything(tmp_path: Path) -> None:
    router, members, store, opts = make(tmp_path, n=2)
    router.health[members[1].url] = False  # only h1 is healthy: taking it out leaves 0
    result = run(router, members, store, min_healthy=1, **opts)
    assert result.status == rec.HALTED and "--min-healthy is 1" in result.record.reason
    assert router.log == [] and "apply" not in members[0].calls


def test_drain_timeout_fails_the_member_out_of_the_router_with_old_config(tmp_path: Path) -> None:
    router, members, store, opts = make(tmp_path)
    members[0].loads = [3]  # never drains
    result = run(router, members, store, drain_timeout=2.0, **opts)
    assert result.status == rec.HALTED
    assert result.where()["h1"] == "failed, out of router (old config)"
    assert "still running" in result.record.members["h1"].detail
    assert "apply" not in members[0].calls and members[0].url not in router.listed


def test_a_worker_the_router_will_not_admit_stays_out(tmp_path: Path) -> None:
    router, members, store, opts = make(tmp_path)
    router.on_add = lambda url: router.health.__setitem__(url, url != members[0].url)
    result = run(router, members, store, **opts)
    assert result.status == rec.HALTED and result.where()["h1"] == "failed, out of router (new config)"
    assert members[0].url not in router.listed


def test_serial_batches_and_max_fail(tmp_path: Path) -> None:
    router, members, store, opts = make(tmp_path, n=5)
    members[2].smoke_ok = False
    result = run(router, members, store, serial=2, max_fail=1, min_healthy=1, **opts)
    # canary h1, then [h2, h3] together, then [h4, h5]; one failure is allowed
    assert result.order == ["h1", "h2", "h3", "h4", "h5"]
    assert all("apply" in m.calls for m in members)
    assert result.where()["h3"].startswith("failed") and members[2].url not in router.listed
    assert result.exit_code == 1 and "1 member(s) failed" in result.record.reason


def test_router_restart_mid_deploy_does_not_readmit_the_member_being_deployed(tmp_path: Path) -> None:
    router, members, store, opts = make(tmp_path)
    clock = Clock()
    roll = Roll("f", members, router, RollOptions(**opts), store, sleep=clock.sleep, clock=clock)  # type: ignore[arg-type]

    def restart_then_resync() -> None:
        router.restart()  # the router forgets everyone
        roll.resync()  # what the background resync does every second
        assert members[1].url not in router.listed
        assert {members[0].url, members[2].url} <= set(router.listed)

    members[1].during_apply = restart_then_resync
    result = roll.run()
    assert result.status == rec.DONE and set(router.listed) == {m.url for m in members}


def test_a_restarted_router_gets_every_member_in_service_back_at_once(tmp_path: Path) -> None:
    router, members, store, opts = make(tmp_path, n=4)
    clock = Clock()
    roll = Roll("f", members, router, RollOptions(**opts), store, sleep=clock.sleep, clock=clock)  # type: ignore[arg-type]
    together = threading.Barrier(3, timeout=5)  # each add returns only once all three are in flight

    def restart_then_resync() -> None:
        router.restart()
        router.on_add = lambda url: together.wait()
        try:
            roll.resync()
        finally:
            router.on_add = None
        assert set(router.listed) == {members[0].url, members[2].url, members[3].url}

    members[1].during_apply = restart_then_resync
    assert roll.run().status == rec.DONE


def test_resync_removes_a_member_listed_while_out_of_service(tmp_path: Path) -> None:
    router, members, store, opts = make(tmp_path)
    clock = Clock()
    roll = Roll("f", members, router, RollOptions(**opts), store, sleep=clock.sleep, clock=clock)  # type: ignore[arg-type]

    def someone_readds_it() -> None:
        router.add(members[0].url)  # e.g. a router started with a static worker list
        roll.resync()
        assert members[0].url not in router.listed

    members[0].during_apply = someone_readds_it
    assert roll.run().status == rec.DONE


@pytest.mark.parametrize("exc", [KeyboardInterrupt(), Interrupted("interrupted: the new unit is in place")])
def test_ctrl_c_mid_deploy_leaves_every_member_in_a_stated_place(tmp_path: Path, exc: BaseException) -> None:
    router, members, store, opts = make(tmp_path)

    def interrupt() -> None:
        raise exc

    members[1].during_apply = interrupt
    members[1].changes = True
    events: list[RollEvent] = []
    result = run(router, members, store, events, **opts)
    assert result.exit_code == 130 and result.status == rec.STOPPED
    where = result.where()
    assert where["h1"] == "new config, serving"
    # the interrupted member's config is read back from the host (its fake apply did not finish)
    assert where["h2"] == "interrupted, out of router (old config)"
    assert where["h3"] == "old config, serving"
    assert members[1].url not in router.listed and members[2].url in router.listed
    stored = store.load()
    assert stored is not None and stored.status == rec.STOPPED
    # and --resume continues from the interrupted member
    members[1].during_apply = None
    resumed = run(router, members, store, resume=True, **opts)
    assert resumed.status == rec.DONE and resumed.order == ["h2", "h3"]


def test_ctrl_c_while_soaking_takes_the_member_out(tmp_path: Path) -> None:
    router, members, store, opts = make(tmp_path)
    calls = {"n": 0}
    original = members[0].load

    def load() -> int | None:
        calls["n"] += 1
        if members[0].changes is False and calls["n"] > 4:
            raise KeyboardInterrupt
        return original()

    members[0].load = load  # type: ignore[method-assign]
    result = run(router, members, store, **opts)
    assert result.where()["h1"] == "interrupted, out of router (new config)"
    assert members[0].url not in router.listed


class SmokingMember(FakeMember):
    """Its deploy document says the deploy's own smoke step took 12 of the deploy's seconds."""

    def apply(self):  # type: ignore[no-untyped-def]
        outcome = super().apply()
        outcome.data = {"steps": [{"name": "restart", "seconds": 3.0}, {"name": "smoke", "seconds": 12.0}]}
        return outcome


def test_the_deploys_smoke_gets_its_own_seconds_in_the_record(tmp_path: Path) -> None:
    router = FakeRouter()
    clock = Clock()
    members = [
        SmokingMember(
            f"h{i}", f"http://10.0.0.{i}:30000", router=router, during_apply=lambda: clock.sleep(30.0)
        )
        for i in (1, 2)
    ]
    for member in members:
        router.add(member.url)
    store = LocalStore("f", root=tmp_path)
    options = RollOptions(soak=1.0, poll=0.1, sync_interval=3600.0)
    result = Roll("f", members, router, options, store, sleep=clock.sleep, clock=clock).run()  # type: ignore[arg-type]
    assert result.status == "done"
    for name in ("h1", "h2"):
        seconds = result.to_json()["members"][name]["seconds"]
        assert seconds["smoke"] == 12.0 and seconds["deploy"] == 18.0
        assert list(seconds)[:4] == ["remove", "drain", "deploy", "smoke"]
