"""bisect-config end to end on the real lab host (nspawn + sshd + systemd) and the lab server.

The unpatched budget-16 lab profile degenerates for every budget whose verify width (budget + 1)
exceeds the block size 8: between 7 (good) and 16 (bad) the first bad budget is 8.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from collections.abc import Iterable
from pathlib import Path

import pytest

from k26ctl.lab.host import LabHostState
from k26ctl.resources import profiles_dir
from tests.support.cli import run_k26ctl, spawn_k26ctl
from tests.support.hosts import state_env_with_lab_hosts

pytestmark = [pytest.mark.labhost, pytest.mark.lab]

KEY = "spec.ddtree.budget"
LAB = profiles_dir() / "lab"
SUITE = Path(__file__).with_name("lab-bisect-suite.yaml")


@pytest.fixture
def lab_env(lab_host: LabHostState, tmp_path: Path) -> dict[str, str]:
    """Bisect state in a temporary XDG state dir, the lab hosts' state linked in."""
    return state_env_with_lab_hosts(tmp_path)


def _html(page: Path) -> list[str]:
    """--html PAGE where the report extra is installed (the log works the same without it)."""
    import importlib.util

    return ["--html", str(page)] if importlib.util.find_spec("matplotlib") else []


def lab_sets(lab_host: LabHostState, *, short_suite: bool = True) -> list[str]:
    """The lab host, and (except where the exact shipped behaviour is the point) a two-prompt suite
    that keeps each step short."""
    sets = ["--set", f"host.lab={lab_host.name}"]
    return [*sets, "--set", f"smoke.suite={SUITE}"] if short_suite else sets


def budget_search(lab_host: LabHostState, *extra: str, short_suite: bool = True) -> list[str]:
    return [
        "bisect-config",
        str(LAB / "ddtree-b16.yaml"),
        *lab_sets(lab_host, short_suite=short_suite),
        "--param",
        KEY,
        "--good",
        "7",
        "--bad",
        "16",
        "--yes",
        "--json",
        *extra,
    ]


def session_records(env: dict[str, str], session: str = "default") -> list[dict]:
    path = Path(env["XDG_STATE_HOME"]) / "k26ctl" / "bisect" / f"{session}.log.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def unit_sha_on_host(lab_host: LabHostState) -> str | None:
    from k26ctl.profile import load_profile
    from k26ctl.remote import connect
    from k26ctl.render import unit_path

    loaded = load_profile(LAB / "ddtree-b16.yaml", [f"host.lab={lab_host.name}"])
    with connect(loaded.profile) as host:
        return host.sha256(unit_path(loaded.profile), sudo=True)


def test_budget_search_finds_8_within_the_restart_bound_then_reset_restores(
    lab_host: LabHostState, lab_env: dict[str, str]
) -> None:
    """The command as an operator types it: the profile's own smoke suite judges each step."""
    before = unit_sha_on_host(lab_host)
    started = time.monotonic()
    done = run_k26ctl(*budget_search(lab_host, short_suite=False), env=lab_env, timeout=600)
    wall = time.monotonic() - started
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads(done.stdout)
    assert (doc["first_bad"], doc["last_good"]) == (8, 7)
    assert doc["candidates"] == 10 and doc["max_restarts"] == 6  # 2 ends + ceil(log2 10)
    assert doc["restarts"] <= 6 and len(doc["steps"]) <= 6
    assert [s["value"] for s in doc["steps"][:2]] == [7, 16]
    assert {s["verdict"] for s in doc["steps"]} == {"good", "bad"}
    print(f"\nlab budget search: {doc['restarts']} restarts (bound 6, a sweep needs 10), {wall:.1f} s wall")

    page = Path(lab_env["XDG_STATE_HOME"]) / "log.html"
    log = run_k26ctl("bisect-config", "log", *_html(page), env=lab_env, timeout=600)
    assert log.stdout.count("k26-bisect-step") == len(doc["steps"])
    assert "k26ctl deploy" in log.stdout and "--set spec.ddtree.budget=8" in log.stdout
    if _html(page):  # the log's page is the page of its JSON document
        log_json = run_k26ctl("bisect-config", "log", "--json", env=lab_env, timeout=600)
        from k26ctl.report import page_html

        assert page.read_text() == page_html(json.loads(log_json.stdout))

    reset = run_k26ctl("bisect-config", "reset", "--yes", env=lab_env, timeout=600)
    assert reset.returncode == 0, reset.stderr[-2000:]
    assert unit_sha_on_host(lab_host) == before


def _watch(stream: Iterable[str], lines: list[str], arrived: threading.Condition) -> threading.Thread:
    def read() -> None:
        for line in stream:
            with arrived:
                lines.append(line)
                arrived.notify_all()
        with arrived:
            arrived.notify_all()

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


def _run_until_step(args: list[str], env: dict[str, str], step: int, sig: signal.Signals) -> int:
    """Start the search, let it get into `step`'s deploy, send `sig`; returns the exit status."""
    process = spawn_k26ctl(*args, env=env)
    err: list[str] = []
    arrived = threading.Condition()
    assert process.stderr is not None
    reader = _watch(process.stderr, err, arrived)

    def inside_the_steps_deploy() -> bool:
        # the step's header, then the first thing its deploy changed on the host (the unit): from there
        # the restart and the reload take seconds, and the step is unfinished until they end
        lines = list(err)
        starts = [i for i, line in enumerate(lines) if line.startswith(f"bisect: step {step} (")]
        return bool(starts) and any(line.startswith("  deploy ") for line in lines[starts[0] + 1 :])

    with arrived:
        there = arrived.wait_for(lambda: inside_the_steps_deploy() or not reader.is_alive(), timeout=240)
    assert there and inside_the_steps_deploy(), "".join(err)[-3000:]
    process.send_signal(sig)
    process.wait(timeout=120)
    reader.join(timeout=10)
    if sig == signal.SIGINT:
        assert "--resume" in "".join(err), "".join(err)[-3000:]
    return process.returncode


def test_interrupted_then_killed_mid_step_resumes_with_the_same_answer(
    lab_host: LabHostState, lab_env: dict[str, str]
) -> None:
    """Ctrl-C in step 3, --resume; SIGKILL in step 4, --resume: the answer is the one of an
    uninterrupted search, each interrupted step is redone once and no finished step is redone."""
    args = budget_search(lab_host)
    args[args.index("--good") : args.index("--bad") + 2] = ["--values", "7,8,9,12,16"]  # 7, 16, 9, 8

    assert _run_until_step(args, lab_env, 3, signal.SIGINT) == 130
    finished = [r for r in session_records(lab_env) if r["event"] == "finish"]
    assert [r["assignment"][KEY] for r in finished] == [7, 16]
    resume = ["bisect-config", "--resume", "--yes", "--json"]
    assert _run_until_step(resume, lab_env, 4, signal.SIGKILL) == -signal.SIGKILL
    finished = [r for r in session_records(lab_env) if r["event"] == "finish"]
    assert [r["assignment"][KEY] for r in finished] == [7, 16, 9]

    resumed = run_k26ctl(*resume, env=lab_env, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "step 4 (spec.ddtree.budget=8) was interrupted: redoing it" in resumed.stderr
    doc = json.loads(resumed.stdout)
    assert (doc["first_bad"], doc["last_good"]) == (8, 7)
    assert [s["value"] for s in doc["steps"]] == [7, 16, 9, 8]
    records = session_records(lab_env)
    finishes = [r["assignment"][KEY] for r in records if r["event"] == "finish"]
    assert finishes == [7, 16, 9, 8], "a finished step was done twice"
    starts = [r["assignment"][KEY] for r in records if r["event"] == "start"]
    assert starts == [7, 16, 9, 9, 8, 8]
    assert len(doc["steps"]) <= doc["max_restarts"] == 5
    run_k26ctl("bisect-config", "reset", "--yes", env=lab_env, timeout=600)


def test_set_mode_finds_the_budget_among_three_changed_keys(
    lab_host: LabHostState, lab_env: dict[str, str], tmp_path: Path
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        f"extends: {LAB / 'ddtree-b16.yaml'}\n"
        "name: lab-changed-three\n"
        "sglang:\n  context_length: 3072\n  served_model_name: k26lab-renamed\n"
        "spec:\n  ddtree:\n    budget: 9\n"  # 9, not 16: keeps the budget refinement to one probe
    )
    started = time.monotonic()
    done = run_k26ctl(
        "bisect-config",
        "--good-profile",
        str(LAB / "ddtree-b7.yaml"),
        "--bad-profile",
        str(bad),
        *lab_sets(lab_host),
        "--yes",
        "--json",
        env=lab_env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads(done.stdout)
    assert sorted(doc["changed_keys"]) == ["sglang.context_length", "sglang.served_model_name", KEY]
    assert doc["culprit_keys"] == [KEY]
    assert (doc["first_bad"], doc["last_good"]) == (8, 7)
    print(f"\nlab set search: {doc['restarts']} restarts, {time.monotonic() - started:.1f} s wall")
    run_k26ctl("bisect-config", "reset", "--yes", env=lab_env, timeout=600)


LOAD_FAILS_AT_11 = """#!/bin/sh
# bisect test: the lab server dies while loading when started with budget 11
case " $* " in
  *" --speculative-ddtree-budget 11 "*) export K26LAB_FAULT=exit-during-load ;;
esac
exec /opt/k26lab/venv/bin/python "$@"
"""


def test_a_value_whose_service_fails_to_load_is_skipped_and_the_search_converges(
    lab_host: LabHostState, lab_env: dict[str, str]
) -> None:
    """Also the --run path after a real deploy: the command judges through K26_BISECT_URL (a port
    forward over SSH into the lab host) and checks K26_BISECT_PROFILE is the step's profile."""
    from k26ctl.profile import load_profile
    from k26ctl.remote import connect

    wrapper = "/opt/k26lab/bisect-test-python"
    loaded = load_profile(LAB / "ddtree-b16.yaml", [f"host.lab={lab_host.name}"])
    with connect(loaded.profile) as host:
        host.write_file_atomic(wrapper, LOAD_FAILS_AT_11.encode(), mode=0o755, sudo=True, backup=False)
    judge = (
        'grep -q "budget: $K26_BISECT_VALUE$" "$K26_BISECT_PROFILE" || exit 200; '
        f'{sys.executable} -m k26ctl smoke --url "$K26_BISECT_URL" --suite {SUITE}'
    )
    # the ends are trusted here (other tests verify them): 11 (skip), 12, 9, 8
    args = budget_search(lab_host, "--set", f"sglang.python={wrapper}", "--no-verify-ends", "--run", judge)
    done = run_k26ctl(*args, env=lab_env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads(done.stdout)
    steps = [(s["value"], s["verdict"], s["seconds"]) for s in doc["steps"]]
    print("\nsteps with a load failure at 11, judged by --run:", steps)
    assert [(value, verdict) for value, verdict, _ in steps] == [
        (11, "skip"),
        (12, "bad"),
        (9, "bad"),
        (8, "bad"),
    ]
    assert "--run exited 1" in done.stderr and "did not come up" in done.stderr
    assert (doc["first_bad"], doc["last_good"]) == (8, 7)
    assert doc["max_restarts"] == 4  # ceil(log2 10), no end checks
    assert len(doc["steps"]) <= doc["max_restarts"] + 1  # one extra probe for the skipped value
    run_k26ctl("bisect-config", "reset", "--yes", env=lab_env, timeout=600)
