"""Hostile input files and options through the real CLI entry (in-process, fast enough for
hypothesis): duplicate keys, nesting and number limits in profiles and --set, JSON Lines for
`score`, bisect logs, special files, outputs that fail, and odd state directories. Every case ends
with a documented exit code and one `error:` line (or a verdict), never a traceback.

tests/faults/test_profile_fuzz.py fuzzes profile contents in general; this file aims at the limits."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from k26ctl.bisect.logfile import SPEC_MARK, STEP_MARK, parse_log
from k26ctl.errors import ConfigError
from k26ctl.termsafe import is_clean
from tests.support.cli import cli_env, run_in_process
from tests.support.tiers import examples

from .helpers import LAB_PROFILES, REPO, assert_clean_failure

FUZZ = settings(
    max_examples=examples(25),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
PROFILE = str(LAB_PROFILES / "ddtree-b7.yaml")
SECTIONS = ["host", "service", "sglang", "spec", "readiness", "smoke"]


# ---- profiles and --set: the YAML limits -----------------------------------------------------------


@FUZZ
@given(section=st.sampled_from(SECTIONS), gap=st.integers(0, 3), indent=st.sampled_from([2, 4]))
def test_a_duplicated_section_is_refused_not_merged(
    tmp_path: Path, section: str, gap: int, indent: int
) -> None:
    """A second `sglang:` (or any section) used to drop the first silently; now it names the line."""
    body = f"{section}:\n{' ' * indent}x: 1\n" + "\n" * gap + f"{section}:\n{' ' * indent}y: 2\n"
    path = tmp_path / "dup.yaml"
    path.write_text(f"extends: {PROFILE}\n" + body)
    run = run_in_process(["validate", str(path)])
    assert_clean_failure(run, (78,))
    assert f"duplicate key '{section}'" in run.stderr


@FUZZ
@given(depth=st.integers(1, 600), where=st.sampled_from(["file", "set"]))
def test_nesting_at_any_depth_is_valid_or_refused(tmp_path: Path, depth: int, where: str) -> None:
    value = "[" * depth + "1" + "]" * depth
    if where == "file":
        path = tmp_path / "deep.yaml"
        path.write_text(f"extends: {PROFILE}\nsglang:\n  extra_args: {value}\n")
        run = run_in_process(["render", str(path)])
    else:
        run = run_in_process(["render", PROFILE, "--set", f"sglang.extra_args={value}"])
    assert_clean_failure(run, (0, 78))
    if depth > 40:
        assert run.returncode == 78 and "nested deeper than" in run.stderr


@FUZZ
@given(digits=st.integers(1, 6000), negative=st.booleans())
def test_numbers_of_any_size(digits: int, negative: bool) -> None:
    number = ("-" if negative else "") + "7" * digits
    run = run_in_process(["render", PROFILE, "--set", f"sglang.context_length={number}"])
    assert_clean_failure(run, (0, 78))
    if digits > 40:
        assert "number with" in run.stderr


@FUZZ
@given(key=st.text(min_size=1, max_size=20), value=st.text(max_size=40))
def test_control_characters_in_keys_and_values_never_reach_the_terminal(key: str, value: str) -> None:
    run = run_in_process(["render", PROFILE, "--set", f"{key}={value}"])
    assert_clean_failure(run, (0, 2, 78))
    if run.returncode != 0:
        assert is_clean(run.stderr.replace("\n", "")), repr(run.stderr)


def test_an_empty_profile_is_refused(tmp_path: Path) -> None:
    for text in ("", "# nothing\n", "{}\n"):
        path = tmp_path / "empty.yaml"
        path.write_text(text)
        run = run_in_process(["validate", str(path)])
        assert_clean_failure(run, (78,))
        assert "the profile is empty" in run.stderr and "k26-host" in run.stderr
    only_parent = tmp_path / "child.yaml"
    only_parent.write_text(f"extends: {PROFILE}\n")
    assert run_in_process(["render", str(only_parent)]).returncode == 0


def test_a_long_extends_chain_is_refused(tmp_path: Path) -> None:
    (tmp_path / "p0.yaml").write_text(f"extends: {PROFILE}\n")
    for i in range(1, 40):
        (tmp_path / f"p{i}.yaml").write_text(f"extends: p{i - 1}.yaml\n")
    run = run_in_process(["validate", str(tmp_path / "p39.yaml")])
    assert_clean_failure(run, (78,))
    assert "extends chain longer than" in run.stderr


# ---- special files -----------------------------------------------------------------------------------


def _special_files(tmp_path: Path) -> dict[str, str]:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    (tmp_path / "dir").mkdir()
    return {
        "a FIFO": str(fifo),
        "a character device": "/dev/zero",
        "symbolic link loop": str(loop),
        "a directory": str(tmp_path / "dir"),
    }


@pytest.mark.timeout(60)
def test_special_files_are_refused_everywhere_a_file_is_read(tmp_path: Path) -> None:
    """Each would hang (FIFO), never end (/dev/zero) or crash; each is refused before reading."""
    for reason, path in _special_files(tmp_path).items():
        parent = tmp_path / "parent.yaml"
        parent.write_text(f"extends: {path}\nname: x\n")
        for args in (
            ["validate", path],
            ["validate", str(parent)],
            ["score", path],
            ["smoke", "--url", "http://127.0.0.1:9", "--suite", path],
            ["smoke", "--url", "http://127.0.0.1:9", "--baseline", path],
            ["bisect-config", "replay", path],
        ):
            run = run_in_process(args)
            assert_clean_failure(run, (78,))
            assert reason in run.stderr, (args, run.stderr)


def test_a_large_profile_is_refused_by_size_before_parsing(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_text("description: '" + "x" * (2 << 20) + "'\n")
    run = run_in_process(["validate", str(path)])
    assert_clean_failure(run, (78,))
    assert "limit" in run.stderr


# ---- JSON Lines for score ------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=10,
)
hostile_text = st.text(
    alphabet=st.characters() | st.sampled_from(["\x1b", "\u2028", "\u202e", "\x9b", "\x00"]),
    max_size=60,
)
raw_lines = st.one_of(
    st.builds(lambda t, k: json.dumps({"text": t, "id": k}), hostile_text, hostile_text),
    st.builds(lambda t: json.dumps({"text": t}, ensure_ascii=False), hostile_text),
    st.builds(lambda v: json.dumps(v), json_values),
    st.integers(1, 3000).map(lambda n: '{"text": ' + "[" * n + "]" * n + "}"),
    st.integers(1, 6000).map(lambda n: '{"text": "x", "n": ' + "9" * n + "}"),
    st.binary(max_size=40).map(lambda b: b.decode("latin-1")),
    st.just('{"text": "\\ud800 lone"}'),
)


@FUZZ
@given(lines=st.lists(raw_lines, min_size=1, max_size=6), as_json=st.booleans())
def test_score_never_crashes_and_never_prints_controls(
    tmp_path: Path, lines: list[str], as_json: bool
) -> None:
    path = tmp_path / "in.jsonl"
    path.write_bytes("\n".join(lines).encode("utf-8", "surrogatepass"))
    run = run_in_process(["score", str(path), *(["--json"] if as_json else [])])
    assert run.exception is None and "Traceback" not in run.output, run.output
    assert run.returncode in (0, 1, 78), run.output  # 1: a degenerate verdict, not an error
    if run.returncode == 78:
        assert run.stderr.startswith("error: ")
    for line in run.stdout.splitlines():
        assert is_clean(line.replace("\t", " ")), repr(line)
        if as_json:
            json.loads(line)


def test_score_keeps_a_raw_line_separator_inside_a_string(tmp_path: Path) -> None:
    path = tmp_path / "u2028.jsonl"
    path.write_text('{"text": "one\u2028two, a fine answer"}\n{"text": "three"}\n', encoding="utf-8")
    run = run_in_process(["score", str(path)])
    assert run.returncode == 0, run.output
    assert [line.split("\t")[0] for line in run.stdout.splitlines()] == ["1", "2"]


# ---- bisect logs ----------------------------------------------------------------------------------------

spec_docs = st.fixed_dictionaries(
    {},
    optional={
        "mode": st.sampled_from(["numeric", "set", "other", 3]),
        "profile": st.none() | st.text(max_size=10),
        "param": st.none() | st.text(max_size=10),
        "candidates": json_values,
        "run": st.none() | hostile_text,
        "tries": st.integers(-5, 500) | st.text(max_size=3),
        "changes": json_values,
    },
)


@FUZZ
@given(spec=spec_docs, steps=st.lists(json_values, max_size=3), junk=st.lists(raw_lines, max_size=2))
def test_bisect_logs_parse_or_fail_with_a_config_error(
    tmp_path: Path, spec: dict[str, object], steps: list[object], junk: list[str]
) -> None:
    lines = [SPEC_MARK + json.dumps(spec), *(f"true  {STEP_MARK}{json.dumps(s)}" for s in steps), *junk]
    path = tmp_path / "log"
    path.write_bytes("\n".join(lines).encode("utf-8", "surrogatepass"))
    try:
        parsed = parse_log(path)
    except ConfigError as exc:
        assert str(path) in exc.message
        return
    assert parsed.spec.mode in ("numeric", "set")


# ---- outputs ---------------------------------------------------------------------------------------------


def _k26ctl_shell(command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", command],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        env=cli_env({"K26CTL_PY": sys.executable}),
    )


@pytest.mark.timeout(120)
def test_stdout_failures_have_their_own_exit_codes(tmp_path: Path) -> None:
    many = tmp_path / "many.jsonl"
    many.write_text('{"text": "The sky is blue because air scatters short wavelengths."}\n' * 1500)
    few = tmp_path / "few.jsonl"
    few.write_text('{"text": "The sky is blue because air scatters short wavelengths."}\n' * 10)
    py = '"$K26CTL_PY" -m k26ctl'
    full = _k26ctl_shell(f"{py} score {few} > /dev/full")
    assert full.returncode == 74 and "No space left" in full.stderr and "Traceback" not in full.stderr
    closed = _k26ctl_shell(f"{py} render {PROFILE} >&-")
    assert closed.returncode == 74 and "standard output is closed" in closed.stderr
    # --json lines are ~120 bytes: 1500 of them overflow the pipe buffer after `head` has gone
    piped = _k26ctl_shell(f"{py} score --json {many} | head -1; exit ${{PIPESTATUS[0]}}")
    assert piped.returncode == 141 and piped.stderr == "", piped.stderr


@pytest.mark.parametrize("option", ["--junit", "--record-baseline"])
def test_report_paths_are_checked_before_the_run(tmp_path: Path, option: str) -> None:
    for target, said in ((tmp_path / "missing" / "r.xml", "does not exist"), (tmp_path, "is a directory")):
        run = run_in_process(["smoke", "--url", "http://127.0.0.1:9", option, str(target)])
        assert_clean_failure(run, (2,))
        assert said in run.stderr and "smoke: suite" not in run.stderr  # nothing ran
    assert not list(tmp_path.glob(".*.tmp"))


@pytest.mark.parametrize("timeout", ["-1", "0", "nan", "inf", "1e308"])
def test_smoke_timeout_must_be_usable(timeout: str) -> None:
    run = run_in_process(["smoke", "--url", "http://127.0.0.1:9", "--timeout", timeout])
    assert_clean_failure(run, (2,))
    assert "--timeout" in run.stderr


@pytest.mark.parametrize(
    "url", ["http://[::1", "ftp://h", "localhost:30000", "http://u:pw@h:1", "http://h/?q=1"]
)
def test_smoke_url_must_be_a_base_url(url: str) -> None:
    run = run_in_process(["smoke", "--url", url])
    assert_clean_failure(run, (2,))
    assert "pw" not in run.stderr or "u:pw" in run.stderr  # shown as given, never fetched


# ---- state directory -------------------------------------------------------------------------------------


@pytest.mark.parametrize("state", ["file", "unwritable", "relative-no-home"])
def test_bisect_state_directory_problems_are_config_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, state: str
) -> None:
    if state == "file":
        blocker = tmp_path / "state"
        blocker.write_text("")
        monkeypatch.setenv("XDG_STATE_HOME", str(blocker))
    elif state == "unwritable":
        if os.geteuid() == 0:
            monkeypatch.setenv("XDG_STATE_HOME", "/proc/1")  # root can write almost anywhere, not here
        else:
            locked = tmp_path / "locked"
            locked.mkdir(mode=0o500)
            monkeypatch.setenv("XDG_STATE_HOME", str(locked))
    else:
        monkeypatch.setenv("XDG_STATE_HOME", "relative/path")
        monkeypatch.setenv("HOME", "")
        monkeypatch.delenv("STATE_DIRECTORY", raising=False)
        import pwd

        def no_entry(uid: int) -> object:
            raise KeyError(f"getpwuid(): uid not found: {uid}")

        monkeypatch.setattr(pwd, "getpwuid", no_entry)
    search = ["--param", "spec.ddtree.budget", "--good", "7", "--bad", "16", "--no-deploy"]
    run = run_in_process(["bisect-config", PROFILE, *search, "--run", "true", "--yes"])
    assert_clean_failure(run, (78,))
    assert "state" in run.stderr or "home directory" in run.stderr
