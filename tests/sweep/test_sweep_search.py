"""The sweep's search, state and resume against a scripted host (no server, no restarts)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from k26ctl.errors import UsageError
from k26ctl.profile import load_profile
from k26ctl.resources import project_root
from k26ctl.sweep import api
from k26ctl.sweep.result import pareto_front
from k26ctl.sweep.space import grid, parse_param, point_id
from k26ctl.sweep.state import SweepSession
from tests.sweep.scripted import ScriptedHost, coherent, tokens_per_s

PROFILE = str(project_root() / "profiles" / "lab" / "ddtree-b7.yaml")
BUDGETS = "spec.ddtree.budget=2..32"
TOPK = "spec.ddtree.max_topk=1,2,4"


def _spec(params: list[str], target: int = 1, sets: list[str] | None = None) -> api.SweepSpec:
    parsed = [parse_param(p) for p in params]
    return api.build_spec(PROFILE, parsed, concurrency=[1, 4, 8], target=target, sets=sets or [])


def _ctx(tmp_path: Path, host: ScriptedHost, session: str = "t") -> api.Context:
    return api.Context(
        session=session, yes=True, state_directory=tmp_path, deployer=host, measure=host.measure
    )


def grid_best(params: list[str], sets: list[str], concurrency: int) -> float:
    base = load_profile(PROFILE, sets)
    from k26ctl.search.assignment import with_assignment

    scores = []
    for point in grid([parse_param(p) for p in params]):
        loaded = with_assignment(base, point)
        if coherent(loaded):
            scores.append(tokens_per_s(loaded, concurrency))
    return max(scores)


def test_param_specs() -> None:
    assert parse_param("spec.ddtree.budget=4..24:4").values == (4, 8, 12, 16, 20, 24)
    assert parse_param("spec.ddtree.budget=4..6").values == (4, 5, 6)
    assert parse_param("spec.ddtree.max_topk=1,2,4").values == (1, 2, 4)
    assert parse_param("patches=[[], [triton-ddtree-verify-width]]").values == (
        [],
        ["triton-ddtree-verify-width"],
    )
    with pytest.raises(UsageError):
        parse_param("spec.ddtree.budget")
    with pytest.raises(UsageError):
        parse_param("spec.ddtree.budget=4,4")
    assert point_id({"b": 1, "a": 2}) == point_id({"a": 2, "b": 1})


@pytest.mark.parametrize("target", [1, 4, 8])
def test_patched_sweep_finds_the_grid_best_in_few_restarts(tmp_path: Path, target: int) -> None:
    host = ScriptedHost()
    sets = ["patches=[triton-ddtree-verify-width]"]
    result = api.start(_spec([BUDGETS, TOPK], target, sets=sets), _ctx(tmp_path, host))
    best = grid_best([BUDGETS, TOPK], sets, target)
    assert result.best is not None and result.best.coherent
    score = result.score(result.best)
    assert score is not None and score >= 0.97 * best
    assert result.restarts <= 12
    # every measured configuration is distinct: nothing was paid twice
    assert len(host.measured) == len(set(host.measured))


def test_best_budget_moves_with_concurrency(tmp_path: Path) -> None:
    sets = ["patches=[triton-ddtree-verify-width]", "spec.ddtree.max_topk=4"]
    winners = {}
    for target in (1, 8):
        host = ScriptedHost()
        result = api.start(_spec([BUDGETS], target, sets=sets), _ctx(tmp_path, host, f"c{target}"))
        tried = [p for p in result.points if "spec.ddtree.budget" in p.assignment and p.coherent]
        best = max(tried, key=lambda p: result.score(p) or 0.0)
        winners[target] = best.assignment["spec.ddtree.budget"]
    assert winners[1] > winners[8]


def test_unpatched_sweep_never_recommends_an_incoherent_point(tmp_path: Path) -> None:
    host = ScriptedHost()
    result = api.start(_spec([BUDGETS, TOPK]), _ctx(tmp_path, host))
    assert result.best is not None and result.best.coherent
    assert result.best.assignment.get("spec.ddtree.budget", 7) <= 7
    assert any(not p.coherent for p in result.points)  # the search did meet the broken range
    assert all(p.levels == [] for p in result.points if not p.coherent)  # and never measured it
    doc = result.to_json()
    assert doc["best"]["coherent"] is True and doc["restarts"] == result.restarts
    assert {p["role"] for p in doc["points"]} >= {"control", "default", "search"}
    on_front = {p.number for p in pareto_front(result.points, 1)}
    assert on_front and all(p.coherent for p in result.points if p.number in on_front)


def test_interrupted_sweep_resumes_without_losing_or_repaying_a_point(tmp_path: Path) -> None:
    sets = ["patches=[triton-ddtree-verify-width]"]
    spec = _spec([BUDGETS, TOPK], 4, sets=sets)
    host = ScriptedHost(interrupt_at=5)
    with pytest.raises(KeyboardInterrupt):
        api.start(spec, _ctx(tmp_path, host))
    session = SweepSession("t", tmp_path)
    before = session.points()
    assert len(before) == 4 and session.interrupted() is not None
    host.interrupt_at = None
    resumed = api.resume(_ctx(tmp_path, host))
    # the first four points were kept and not measured again; the interrupted one was redone once
    assert [p.number for p in resumed.points[:4]] == [p.number for p in before]
    assert len(host.measured) == len(set(host.measured)) == len(resumed.points)
    assert host.deploys.count(host.deploys[4]) == 2  # the interrupted deploy was repeated ...
    # ... but it was still live, so the redo cost no second restart
    assert not resumed.points[4].restarted and host.restarts == resumed.restarts + 1
    fresh = ScriptedHost()
    uninterrupted = api.start(spec, _ctx(tmp_path, fresh, "u"))
    # the same search: the resumed one visits the same points in the same order (one more at most,
    # since its redone point cost no restart)
    expected = [p.assignment for p in uninterrupted.points]
    assert [p.assignment for p in resumed.points][: len(expected)] == expected


def test_winner_profile_extends_the_original(tmp_path: Path) -> None:
    from k26ctl.sweep.result import write_winner

    out = tmp_path / "winner.yaml"
    write_winner(out, PROFILE, ["patches=[triton-ddtree-verify-width]"], {"spec.ddtree.budget": 16}, "w")
    data = yaml.safe_load(out.read_text())
    assert data["spec"]["ddtree"]["budget"] == 16
    loaded = load_profile(out)
    assert loaded.profile.spec.ddtree.budget == 16 and loaded.profile.patches == [
        "triton-ddtree-verify-width"
    ]
    assert loaded.profile.spec.block_size == 8  # inherited from the original


def test_existing_session_is_refused(tmp_path: Path) -> None:
    host = ScriptedHost()
    spec = _spec([BUDGETS])
    api.start(spec, _ctx(tmp_path, host))
    with pytest.raises(UsageError):
        api.start(spec, _ctx(tmp_path, host))
    result = api.reset(_ctx(tmp_path, host), restore=False)
    assert not result.restored and not SweepSession("t", tmp_path).exists()


def test_patch_as_a_parameter_opens_the_larger_budgets(tmp_path: Path) -> None:
    """From the unpatched default (only small budgets coherent), the sweep finds the patched optimum."""
    params = [
        "spec.ddtree.budget=[4, 5, 6, 7, 8, 10, 12, 16, 20, 24]",
        "spec.ddtree.max_topk=1,4",
        "patches=[[], [triton-ddtree-verify-width]]",
    ]
    host = ScriptedHost()
    result = api.start(_spec(params, 1), _ctx(tmp_path, host))
    assert result.best is not None and result.best.coherent
    assert result.best.assignment["patches"] == ["triton-ddtree-verify-width"]
    score = result.score(result.best)
    assert score is not None and score >= 0.97 * grid_best(params, [], 1)
    assert result.restarts <= 12
