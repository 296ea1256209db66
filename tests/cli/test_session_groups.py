"""`bisect-config` and `sweep` as command groups, through the real `k26ctl` entry point: today's forms
keep working (a profile as first argument, `log`, `reset`, `replay FILE`, `--resume`), each command has
its own options and help, and bad input is a usage error (exit 2). The searches use `--no-deploy --run`,
so no host is needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import run_here

REPO = Path(__file__).resolve().parents[2]
KEY = "spec.ddtree.budget"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"XDG_STATE_HOME": str(tmp_path / "state")}


@pytest.fixture
def profile(tmp_path: Path) -> Path:
    """A profile file with a name that means nothing to the group."""
    path = tmp_path / "budget16.yaml"
    path.write_text(f"extends: {REPO / 'profiles' / 'ddtree-b16.yaml'}\n")
    return path


def test_bisect_profile_first_then_log_reset_and_replay(
    tmp_path: Path, env: dict[str, str], profile: Path
) -> None:
    search = [str(profile), "--param", KEY, "--good", "7", "--bad", "16", "--no-deploy", "--yes"]
    done = run_here("bisect-config", *search, "--run", "test $K26_BISECT_VALUE -lt 8", "--json", env=env)
    assert done.returncode == 0, done.stderr
    assert (json.loads(done.stdout)["first_bad"], json.loads(done.stdout)["last_good"]) == (8, 7)

    log = run_here("bisect-config", "--session", "default", "log", env=env)  # options before the word
    assert log.returncode == 0, log.stderr
    assert log.stdout.startswith("# k26ctl bisect-config log: session default, numeric search")
    (tmp_path / "saved.log").write_text(log.stdout)

    again = run_here("bisect-config", "--resume", "--yes", "--json", env=env)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["first_bad"] == 8

    assert run_here("bisect-config", "reset", "--yes", env=env).returncode == 0
    gone = run_here("bisect-config", "log", env=env)
    assert gone.returncode == 2 and "no bisect session 'default'" in gone.stderr

    replayed = run_here("bisect-config", "replay", str(tmp_path / "saved.log"), "--yes", "--json", env=env)
    assert replayed.returncode == 0, replayed.stderr
    assert json.loads(replayed.stdout)["first_bad"] == 8


def test_bisect_a_profile_named_like_a_command_is_reached_with_start(
    tmp_path: Path, env: dict[str, str], profile: Path
) -> None:
    profile.rename(tmp_path / "log")
    search = ["log", "--param", KEY, "--good", "7", "--bad", "16", "--no-deploy", "--run", "true", "--yes"]
    done = run_here("bisect-config", "start", *search, "--json", env=env, cwd=tmp_path)
    # the file `log` was searched: every value is good, so the bad end check fails (exit 1)
    assert done.returncode == 1, done.stderr
    assert "spec.ddtree.budget=16 -> good" in done.stderr and "end check failed" in done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["bisect-config", "--bogus"], "No such option: --bogus"),
        (["bisect-config", "log", "--param", KEY], "No such option: --param"),
        (["bisect-config", "reset", "--good", "7"], "No such option: --good"),
        (["bisect-config", "replay"], "Missing argument 'FILE'"),
        (["bisect-config", "--resume", "p.yaml"], "--resume takes no PROFILE"),
        (["bisect-config", "--resume", "--param", KEY], "--resume takes no search options (--param)"),
        (["bisect-config"], "give PROFILE --param KEY --good A --bad B"),
        (["sweep", "--bogus"], "No such option: --bogus"),
        (["sweep", "log", "--param", "k=1,2"], "No such option: --param"),
        (["sweep", "p.yaml"], "give PROFILE and at least one --param KEY=SPEC"),
        (["sweep", "--resume", "--param", "k=1,2"], "--param belongs to a new sweep"),
    ],
)
def test_bad_input_is_a_usage_error(env: dict[str, str], args: list[str], message: str) -> None:
    run = run_here(*args, env=env)
    assert run.returncode == 2, (run.stdout, run.stderr)
    assert message in run.stderr
    assert run.stdout == ""


def test_sweep_log_and_reset_without_a_session_name_the_session(env: dict[str, str]) -> None:
    for command in (["sweep", "log"], ["sweep", "reset", "--yes"], ["sweep", "--json", "log"]):
        run = run_here(*command, env=env)
        assert run.returncode == 2 and "no sweep session 'default'" in run.stderr, (command, run.stderr)


def test_group_and_command_help(env: dict[str, str]) -> None:
    group = run_here("bisect-config", "--help", env=env)
    assert group.returncode == 0
    assert "bisect-config [COMMAND] [ARGS]..." in group.stdout
    for name in ("start", "log", "replay", "reset"):
        assert f"\n  {name} " in group.stdout
    replay = run_here("bisect-config", "replay", "-h", env=env)
    assert replay.returncode == 0 and "--run-recorded-command" in replay.stdout and "FILE" in replay.stdout
    assert "--param" not in replay.stdout
    start = run_here("sweep", "start", "--help", env=env)
    assert start.returncode == 0
    assert "--concurrency" in start.stdout and "--accept-new-host-key" in start.stdout
    profile_help = run_here("sweep", "some-profile.yaml", "--help", env=env)
    assert profile_help.stdout == start.stdout
