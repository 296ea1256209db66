"""The roll's decisions behind a gateway with a drain window (SMG), against a fake of its semantics."""

from __future__ import annotations

from pathlib import Path

from k26ctl.fleet import record as rec
from k26ctl.fleet.record import LocalStore
from k26ctl.fleet.roll import RollEvent

from .fakes import FakeMember, FakeSmg
from .test_roll_logic import run


def make_smg(tmp_path: Path, counts: list[int]) -> tuple[FakeSmg, list[FakeMember], LocalStore]:
    smg = FakeSmg(counts)
    members = [FakeMember(f"h{i}", f"http://10.0.0.{i}:30000", router=smg) for i in (1, 2)]
    for m in members:
        smg.add(m.url)
    smg.log.clear()
    return smg, members, LocalStore("f", root=tmp_path)


def test_the_drain_waits_for_the_gateways_own_count_then_ends_its_window(tmp_path: Path) -> None:
    smg, members, store = make_smg(tmp_path, counts=[3, 1, 0, 0])
    members[0].loads = [0]  # the worker itself is idle at once: only the gateway's count holds the drain
    members[1].changes = False  # already at the target: h1 alone rolls
    events: list[RollEvent] = []
    result = run(smg, members, store, events, soak=0.5, poll=0.1, sync_interval=3600.0)
    assert result.status == rec.DONE
    said = [e.message for e in events if e.kind == "gateway" and e.member == "h1"]
    assert said == ["its count of requests in flight went from 3 to 0"]
    h1 = members[0].url
    ops = [op for op, url in smg.log if url == h1]
    # take out, four reads of SMG's count (3, 1, 0, 0: zero twice), the removal ends the window, add
    assert ops == ["take_out", "in_flight", "in_flight", "in_flight", "in_flight", "remove", "add"]
    assert h1 not in smg.draining and h1 in smg.listed


def test_a_count_that_never_reaches_zero_fails_the_drain_and_the_member_stays_out(tmp_path: Path) -> None:
    smg, members, store = make_smg(tmp_path, counts=[2])
    result = run(smg, members, store, soak=0.5, poll=0.5, drain_timeout=3.0, sync_interval=3600.0)
    assert result.status == rec.HALTED
    state = result.record.members["h1"]
    assert state.phase == rec.FAILED and "gateway counts 2 request(s) in flight" in state.detail
    assert "apply" not in members[0].calls  # never deployed under running requests
    assert members[0].url not in smg.listed


def test_the_settings_kept_at_take_out_are_given_back_at_add_and_survive_in_the_record(
    tmp_path: Path,
) -> None:
    smg, members, store = make_smg(tmp_path, counts=[0, 0])
    kept = {"priority": 80, "cost": 2.0}
    smg.kept[members[0].url] = kept
    events: list[RollEvent] = []
    result = run(smg, members, store, events, soak=0.5, poll=0.1, sync_interval=3600.0)
    assert result.status == rec.DONE
    assert smg.settings[members[0].url] == kept
    assert smg.settings[members[1].url] == {}
    saved = store.load()
    assert saved is not None and saved.members["h1"].gateway == kept


def test_a_draining_entry_is_not_in_service_for_the_resync(tmp_path: Path) -> None:
    """A member in SMG's drain window is listed but takes no request: the resync neither re-adds it
    (it is out of service) nor treats an in-service member that shows as draining as listed."""
    smg, members, store = make_smg(tmp_path, counts=[0, 0])
    smg.take_out(members[1].url)  # someone else DELETEd h2: SMG lists it as draining
    smg.log.clear()
    members[1].changes = False
    result = run(smg, members, store, soak=0.5, poll=0.1, sync_interval=3600.0)
    assert result.status == rec.DONE
    assert ("add", members[1].url) in smg.log  # re-admitted by the resync: a draining entry is not service


def test_a_gateway_that_stops_answering_mid_drain_leaves_the_drain_to_the_workers_own_load(
    tmp_path: Path,
) -> None:
    from k26ctl.errors import UnreachableError

    smg, members, store = make_smg(tmp_path, counts=[2])
    answers = iter([2])

    def in_flight(url: str) -> int | None:
        for count in answers:
            return count
        raise UnreachableError("gateway did not answer GET /workers")  # SMG restarting

    smg.in_flight = in_flight  # type: ignore[method-assign]
    members[0].loads = [1, 0, 0]
    members[1].changes = False
    events: list[RollEvent] = []
    result = run(smg, members, store, events, soak=0.5, poll=0.1, sync_interval=3600.0)
    assert result.status == rec.DONE
    assert "load" in members[0].calls and members[0].loads == [0]  # the worker's own load was read down
    warned = [e.message for e in events if e.kind == "warning" and e.member == "h1"]
    assert warned == ["the gateway's drain count: gateway did not answer GET /workers"]
