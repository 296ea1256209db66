"""The --run verdict path with real commands: exit codes, environment, tries, interruption and resume
through the real `k26ctl` entry point (with --no-deploy, so no host is needed)."""

from __future__ import annotations

import io
import json
import os
import signal
import time
from pathlib import Path

import pytest

from k26ctl.bisect.engine import run_search
from k26ctl.bisect.numeric import NumericSearch
from k26ctl.bisect.plan import Probe
from k26ctl.bisect.session import Session, SessionSpec
from k26ctl.bisect.steps import CommandJudge, DeployingStepRunner
from k26ctl.bisect.verdict import AbortSearch
from k26ctl.search.verdict import Verdict
from tests.support.cli import run_here, spawn_k26ctl

KEY = "spec.ddtree.budget"
PROFILE = str(Path(__file__).resolve().parents[2] / "profiles" / "ddtree-b16.yaml")


def probe(value: object) -> Probe:
    return Probe({KEY: value}, "search", "", 1)


@pytest.mark.parametrize(
    ("code", "verdict"), [(0, Verdict.GOOD), (1, Verdict.BAD), (125, Verdict.SKIP), (127, Verdict.BAD)]
)
def test_exit_code_is_the_verdict(code: int, verdict: Verdict) -> None:
    judge = CommandJudge(f"exit {code}", stream=io.StringIO())
    assert judge.judge(probe(8), 1, None, None)[0] is verdict


def test_exit_128_and_death_by_signal_abort() -> None:
    with pytest.raises(AbortSearch):
        CommandJudge("exit 128", stream=io.StringIO()).judge(probe(8), 1, None, None)
    with pytest.raises(AbortSearch):
        CommandJudge("kill -9 $$", stream=io.StringIO()).judge(probe(8), 1, None, None)


def test_command_sees_the_value_and_its_output_goes_to_the_stream() -> None:
    out = io.StringIO()
    judge = CommandJudge(
        'echo "$K26_BISECT_KEY=$K26_BISECT_VALUE step $K26_BISECT_STEP $K26_BISECT_ASSIGNMENT '
        '${K26_BISECT_URL:-no-url}"',
        session="s1",
        stream=out,
    )
    judge.judge(probe(11), 4, None, "http://127.0.0.1:9")
    assert (
        out.getvalue().strip() == 'spec.ddtree.budget=11 step 4 {"spec.ddtree.budget": 11} http://127.0.0.1:9'
    )


def test_string_values_are_passed_verbatim() -> None:
    out = io.StringIO()
    CommandJudge('printf %s "$K26_BISECT_VALUE"', stream=out).judge(probe("triton"), 1, None, None)
    assert out.getvalue() == "triton"


def test_the_step_profile_is_written_for_the_command(tmp_path: Path) -> None:
    from k26ctl.profile import load_profile

    base = load_profile(PROFILE)
    out = io.StringIO()
    runner = DeployingStepRunner(
        base=base, deployer=None, judge=CommandJudge('cat "$K26_BISECT_PROFILE"', stream=out)
    )
    assert runner.run(probe(9), 1).verdict is Verdict.GOOD
    assert "budget: 9" in out.getvalue()


def test_tries_stop_at_the_first_bad_and_need_all_good(tmp_path: Path) -> None:
    counter = tmp_path / "n"
    counter.write_text("0")
    # bad on the 3rd call only: a flaky failure
    script = f"n=$(($(cat {counter}) + 1)); echo $n > {counter}; test $n -ne 3"
    runner = DeployingStepRunner(
        base=None, deployer=None, judge=CommandJudge(script, stream=io.StringIO()), tries=5
    )
    outcome = runner.run(probe(8), 1)
    assert outcome.verdict is Verdict.BAD
    assert outcome.tries == [Verdict.GOOD, Verdict.GOOD, Verdict.BAD]
    counter.write_text("10")
    outcome = runner.run(probe(8), 2)
    assert outcome.verdict is Verdict.GOOD and len(outcome.tries) == 5


def test_search_with_a_real_command_and_a_skipped_value(tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    script = (
        f"echo $K26_BISECT_VALUE >> {calls}; "
        "[ $K26_BISECT_VALUE = 11 ] && exit 125; test $K26_BISECT_VALUE -lt 9"
    )
    session = Session("s", tmp_path)
    session.create(SessionSpec(mode="numeric", param=KEY, candidates=list(range(7, 17)), deploy=False))
    runner = DeployingStepRunner(base=None, deployer=None, judge=CommandJudge(script, stream=io.StringIO()))
    result = run_search(session, NumericSearch(KEY, list(range(7, 17))), runner)
    doc = result.to_json()
    assert (doc["first_bad"], doc["last_good"]) == (9, 8)
    assert [s["verdict"] for s in doc["steps"][:3]] == ["good", "bad", "skip"]
    judged = calls.read_text().split()
    assert judged[:3] == ["7", "16", "11"] and len(judged) == len(set(judged))


# ---- through the real entry point ---------------------------------------------------------------


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"XDG_STATE_HOME": str(tmp_path / "state")}


SEARCH = ["bisect-config", PROFILE, "--param", KEY, "--good", "7", "--bad", "16", "--no-deploy", "--yes"]


def test_cli_json_result_and_log_replay_reset(tmp_path: Path, env: dict[str, str]) -> None:
    done = run_here(*SEARCH, "--run", "test $K26_BISECT_VALUE -lt 8", "--json", env=env)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert (doc["first_bad"], doc["last_good"]) == (8, 7)
    assert len(doc["steps"]) <= doc["max_restarts"] == 6
    assert {"value", "verdict", "seconds"} <= set(doc["steps"][0])
    assert "bisect: step 1" in done.stderr  # progress on stderr, stdout is only the JSON

    again = run_here(*SEARCH, "--run", "true", env=env)
    assert again.returncode == 2 and "already exists" in again.stderr

    log = run_here("bisect-config", "log", env=env)
    assert log.returncode == 0 and log.stdout.count("# k26-bisect-step ") == len(doc["steps"])
    (tmp_path / "log.txt").write_text(log.stdout)
    log_doc = json.loads(run_here("bisect-config", "log", "--json", env=env).stdout)
    assert log_doc["session"] == "default" and log_doc["spec"]["param"] == KEY
    assert "original" not in log_doc["spec"]
    assert [s["assignment"][KEY] for s in log_doc["steps"]] == [s["value"] for s in doc["steps"]]
    assert run_here("bisect-config", "reset", env=env).returncode == 0
    replayed = run_here("bisect-config", "replay", str(tmp_path / "log.txt"), "--json", env=env)
    assert replayed.returncode == 0, replayed.stderr
    assert json.loads(replayed.stdout)["first_bad"] == 8
    assert "judging" not in replayed.stderr


def test_cli_replay_of_an_edited_log_continues_the_search(tmp_path: Path, env: dict[str, str]) -> None:
    calls = tmp_path / "calls"
    run = f"echo $K26_BISECT_VALUE >> {calls}; test $K26_BISECT_VALUE -lt 8"
    assert run_here(*SEARCH, "--run", run, env=env).returncode == 0
    text = run_here("bisect-config", "log", env=env).stdout
    # keep only the two end checks: the replay has to finish the search itself
    kept = [
        line
        for line in text.splitlines()
        if "k26-bisect-step" not in line or '"step": 1' in line or '"step": 2' in line
    ]
    (tmp_path / "log.txt").write_text("\n".join(kept) + "\n")
    calls.write_text("")
    assert run_here("bisect-config", "reset", env=env).returncode == 0
    log = str(tmp_path / "log.txt")
    # The command comes from a file: --yes alone never runs it; the refusal shows it and its directory.
    refused = run_here("bisect-config", "replay", log, "--yes", "--json", env=env)
    assert refused.returncode == 2, refused.stderr
    assert run in refused.stderr and os.getcwd() in refused.stderr
    assert "--run-recorded-command" in refused.stderr and "Traceback" not in refused.stderr
    # Allowed by the flag but without a terminal to confirm that exact command: still refused.
    no_tty = run_here("bisect-config", "replay", log, "--run-recorded-command", "--yes", env=env)
    assert no_tty.returncode == 2 and "needs a terminal" in no_tty.stderr
    assert calls.read_text() == ""
    # On a terminal, declining the shown command changes nothing; confirming it finishes the search.
    declined, transcript = _replay_on_a_terminal(log, env, answer="n")
    assert declined != 0 and run in transcript and calls.read_text() == ""
    assert run_here("bisect-config", "reset", "--keep-deployment", env=env).returncode in (0, 2)
    code, transcript = _replay_on_a_terminal(log, env, answer="y")
    assert code == 0, transcript
    assert run in transcript and "first bad" in transcript.lower()
    judged = calls.read_text().split()
    assert judged and "7" not in judged and "16" not in judged


def _replay_on_a_terminal(log: str, env: dict[str, str], answer: str) -> tuple[int, str]:
    """`replay LOG --run-recorded-command` with stdin/stderr on a pseudo-terminal; answers every
    question with `answer` once the prompt naming the command appeared. Returns (exit code, output)."""
    import pty
    import select

    primary, secondary = pty.openpty()
    proc = spawn_k26ctl(
        "bisect-config",
        "replay",
        log,
        "--run-recorded-command",
        "--yes",
        env=env,
        stdin=secondary,
        stdout=secondary,
        stderr=secondary,
    )
    os.close(secondary)
    seen = b""
    answered = 0
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([primary], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(primary, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
            if seen.count(b"[y/N]") > answered:
                answered += 1
                os.write(primary, answer.encode() + b"\n")
        elif proc.poll() is not None:
            break
    proc.wait(timeout=30)
    os.close(primary)
    return proc.returncode, seen.decode("utf-8", "replace")


def test_cli_end_check_failure_stops_with_a_message(env: dict[str, str]) -> None:
    failed = run_here(*SEARCH, "--run", "exit 1", env=env)
    assert failed.returncode == 1
    assert "end check failed" in failed.stderr and "good end spec.ddtree.budget=7" in failed.stderr
    assert "Traceback" not in failed.stderr


def test_cli_usage_errors(env: dict[str, str]) -> None:
    no_run = run_here(
        "bisect-config",
        PROFILE,
        "--param",
        KEY,
        "--good",
        "7",
        "--bad",
        "16",
        "--no-deploy",
        env=env,
    )
    assert no_run.returncode == 2 and "--no-deploy needs --run" in no_run.stderr
    unknown = run_here(*SEARCH, "--run", "true", "--param", "spec.ddtree.budgte", env=env)
    assert unknown.returncode == 78 and "did you mean" in unknown.stderr
    nothing = run_here("bisect-config", "--resume", env=env)
    assert nothing.returncode == 2 and "no bisect session" in nothing.stderr


def _wait_for(path: Path, timeout: float = 120.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        time.sleep(0.05)
    raise AssertionError(f"{path} never appeared")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_cli_killed_mid_step_resumes_without_repeating_finished_steps(
    tmp_path: Path, env: dict[str, str], sig: signal.Signals
) -> None:
    calls, hang = tmp_path / "calls", tmp_path / "hanging"
    # the third judged value hangs the first time (the marker records the command's pid)
    run = (
        f"echo $K26_BISECT_VALUE >> {calls}; "
        f"if [ $(wc -l < {calls}) -eq 3 ] && [ ! -e {hang} ]; then echo $$ > {hang}; sleep 60; fi; "
        "test $K26_BISECT_VALUE -lt 8"
    )
    process = spawn_k26ctl(*SEARCH, "--run", run, "--json", env=env)
    pid = int(_wait_for(hang))
    process.send_signal(sig)
    out, err = process.communicate(timeout=30)
    if sig == signal.SIGINT:
        assert process.returncode == 130 and "--resume" in err
        with pytest.raises(ProcessLookupError):  # the interrupted command was stopped with it
            deadline = time.monotonic() + 30  # generous: it is gone once init has reaped it
            while time.monotonic() < deadline:
                os.kill(pid, 0)
                time.sleep(0.1)
    else:
        assert process.returncode == -signal.SIGKILL
        os.kill(pid, signal.SIGKILL)  # nobody is left to stop the orphaned command
    assert out == ""

    resumed = run_here("bisect-config", "--resume", "--yes", "--json", env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert "was interrupted: redoing it" in resumed.stderr
    doc = json.loads(resumed.stdout)
    assert (doc["first_bad"], doc["last_good"]) == (8, 7)
    judged = calls.read_text().split()
    interrupted = judged[2]
    assert judged.count(interrupted) == 2  # the step that was cut off ran again...
    assert all(judged.count(v) == 1 for v in judged if v != interrupted)  # ...and nothing else did
    values = [s["value"] for s in doc["steps"]]
    assert len(values) == len(set(values))
    assert len(doc["steps"]) <= doc["max_restarts"]
