"""Hostile state: every file k26ctl wrote earlier and reads back, after someone changed it.

For each reader (bisect session file and log, sweep session file and log, the deploy history, the
fleet run record, smoke baselines, lab host and lab fleet state) hypothesis starts from a record as
k26ctl writes it and damages it: one field set to an arbitrary JSON value (strings with lone
surrogates, NUL and control characters), a field dropped, nesting thousands of levels deep, the
text cut anywhere, NUL bytes, or arbitrary bytes. The property: a correct reading (the untouched
records all read, every field of its type, every string encodable) or one ConfigError line (exit 78)
naming the file, never any other exception. `TRIED` counts the inputs; the faults conftest prints it.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from k26ctl.errors import ConfigError
from tests.support.tiers import examples

# derandomized, no database, no deadline: the suite's profile (tests/conftest.py)
STATE = settings(
    max_examples=examples(40),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
TRIED: Counter[str] = Counter()
OUTCOMES: Counter[str] = Counter()  # "read" / "refused": both must occur, or the damage misses

DEEP = "__DEEP__"
hostile_text = st.text(
    alphabet=st.characters(codec=None)
    | st.sampled_from(["\ud800", "\udfff", "\x00", "\x1b", "\x9b", "\u202e", "\u2028", "\ufffd"]),
    max_size=12,
)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | hostile_text,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(hostile_text, children, max_size=3),
    max_leaves=8,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield (*prefix, key)
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield (*prefix, index)
            yield from _paths(item, (*prefix, index))


def _set(doc: Any, path: tuple[Any, ...], value: Any, drop: bool = False) -> None:
    for part in path[:-1]:
        doc = doc[part]
    if drop:
        del doc[path[-1]]
    else:
        doc[path[-1]] = value


@st.composite
def damaged(draw: st.DrawFn, record: dict[str, Any]) -> tuple[str, bytes]:
    """(how, the record's bytes after the damage); how == "same" leaves it as written."""
    doc = json.loads(json.dumps(record))
    how = draw(
        st.sampled_from(["same", "value", "drop", "deep", "surrogate", "cut", "nul", "whole", "bytes"])
    )
    paths = list(_paths(doc))
    if how in ("value", "drop", "deep", "surrogate") and paths:
        path = draw(st.sampled_from(paths))
        if how == "value":
            _set(doc, path, draw(json_values))
        elif how == "drop":
            _set(doc, path, None, drop=True)
        elif how == "deep":
            _set(doc, path, DEEP)
        else:
            _set(doc, path, "x\ud800y\udc00" + draw(hostile_text))
    if how == "whole":
        doc = draw(json_values)
    text = json.dumps(doc, ensure_ascii=draw(st.booleans()))
    if how == "deep":
        depth = draw(st.integers(1, 3000))
        text = text.replace(f'"{DEEP}"', "[" * depth + "]" * depth)
    data = text.encode("utf-8", "surrogatepass")  # raw surrogates when not escaped: not UTF-8
    if how == "cut":
        data = data[: draw(st.integers(0, max(0, len(data) - 1)))]
    elif how == "nul":
        at = draw(st.integers(0, len(data)))
        data = data[:at] + b"\x00" + data[at:]
    elif how == "bytes":
        data = draw(st.binary(max_size=64))
    return how, data


def refused_or_read(reader: str, read: Callable[[], Any], where: Path | str) -> Any:
    """The reading, or None after checking the refusal is one ConfigError line naming the file."""
    TRIED[reader] += 1
    try:
        reading = read()
    except ConfigError as exc:
        assert exc.exit_code == 78, exc.one_line()
        assert "\n" not in exc.message, exc.message
        assert str(where) in exc.message, (str(where), exc.message)
        OUTCOMES["refused"] += 1
        return None
    OUTCOMES["read"] += 1
    return reading


def _encodable(value: Any) -> None:
    """Every string reachable from a reading can be written as UTF-8."""
    if isinstance(value, str):
        value.encode("utf-8")
    elif isinstance(value, dict):
        for key, item in value.items():
            _encodable(key)
            _encodable(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _encodable(item)
    elif hasattr(value, "__dataclass_fields__"):
        for f in fields(value):
            _encodable(getattr(value, f.name))


# ---- whole-document readers ------------------------------------------------------------------------


def _bisect_session_file() -> dict[str, Any]:
    from k26ctl.bisect.session import SessionSpec

    spec = SessionSpec(
        mode="numeric",
        profile="p.yaml",
        param="spec.ddtree.budget",
        candidates=[7, 8, 9],
        created=5.0,
        cwd="/w",
    )
    return {"name": "s", "spec": spec.to_json(), "outcome": {"status": "found", "first_bad": 9}}


def _sweep_session_file() -> dict[str, Any]:
    from k26ctl.sweep.state import SweepSpec

    spec = SweepSpec(
        profile="p.yaml",
        params=[{"key": "spec.ddtree.budget", "values": [7, 8]}],
        concurrency=[1, 4],
        objective={"concurrency": 4, "max_ttft_p99_ms": 500.0},
        created=5.0,
    )
    return {"name": "s", "spec": spec.to_json()}


def _run_record() -> dict[str, Any]:
    from k26ctl.fleet.record import MemberState, RunRecord

    members = {"a": MemberState("new", "new", "", "x", {"deploy": 3.0}, "t"), "b": MemberState(updated="t")}
    return RunRecord("f", "r1", "deploy", "running", "t", "", "", {"a": "x", "b": "y"}, members).to_json()


def _baseline() -> dict[str, Any]:
    from k26ctl.smoke.baseline import Baseline, BaselineEntry

    entries = {"p": BaselineEntry("p", "The sky is blue.", "", 40), "q": BaselineEntry("q", "42")}
    return Baseline({"model": "m"}, "default", entries, "2026-12-01T00:00:00+00:00").to_json()


def _lab_host_state(tmp: Path) -> dict[str, Any]:
    from k26ctl.lab.host.machine import LabHostState

    state = LabHostState("k26h-s", 3, "10.231.3.2", 22, "key", "known_hosts", 1234, str(tmp))
    return state.to_json()


def _lab_fleet_state() -> dict[str, Any]:
    from k26ctl.lab.fleet import LabFleetState

    return asdict(LabFleetState("f", ["a"], ["http://10.231.3.2:30000"], "f.yaml", "http://r", 5, "log", {}))


def _read_bisect_spec(directory: Path) -> Any:
    from k26ctl.bisect.session import Session

    session = Session("s", directory)
    return session.spec(), session.outcome()


def _read_sweep_spec(directory: Path) -> Any:
    from k26ctl.sweep.state import SweepSession

    spec = SweepSession("s", directory).spec()
    return spec, spec.param_list(), spec.objective_obj()


def _read_run_record(directory: Path) -> Any:
    from k26ctl.fleet.record import LocalStore

    record = LocalStore("f", directory).load()
    assert record is not None
    assert all(m.in_service in (True, False) for m in record.members.values())
    return record


def _read_baseline(path: Path) -> Any:
    from k26ctl.smoke.baseline import Baseline

    return Baseline.load(path)


def _read_lab_host(root: Path) -> Any:
    from k26ctl.lab.host.machine import load_state

    os.environ["XDG_STATE_HOME"] = str(root)
    return load_state("k26h-s")


def _read_lab_fleet(root: Path) -> Any:
    from k26ctl.lab.fleet import load_state

    os.environ["XDG_STATE_HOME"] = str(root)
    return load_state("f")


# reader name -> (the record as written, where it lives under a root, the read)
def _watch_last() -> dict[str, Any]:
    return {"state": "healthy", "verdict": "healthy", "time": 5.0, "reasons": [], "target": "lab"}


def _read_watch_last(root: Path) -> Any:
    from k26ctl.watch.store import WatchStore

    return WatchStore(root).read_last()


DOCUMENTS: dict[str, tuple[Callable[[Path], dict[str, Any]], str, Callable[[Path], Any]]] = {
    "bisect session file": (lambda tmp: _bisect_session_file(), "s.json", _read_bisect_spec),
    "sweep session file": (lambda tmp: _sweep_session_file(), "s.json", _read_sweep_spec),
    "fleet run record": (lambda tmp: _run_record(), "run.json", _read_run_record),
    "smoke baseline": (
        lambda tmp: _baseline(),
        "baseline.json",
        lambda root: _read_baseline(root / "baseline.json"),
    ),
    "lab host state": (_lab_host_state, "k26ctl/lab/k26h-s/state.json", _read_lab_host),
    "lab fleet state": (lambda tmp: _lab_fleet_state(), "k26ctl/lab/fleet-f/state.json", _read_lab_fleet),
    "watch last verdict": (lambda tmp: _watch_last(), "last.json", _read_watch_last),
}


@pytest.fixture()
def state_home(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", os.environ.get("XDG_STATE_HOME", "/nonexistent"))


@pytest.mark.usefixtures("state_home")
@pytest.mark.parametrize("reader", sorted(DOCUMENTS))
@STATE
@given(data=st.data())
def test_a_damaged_state_document_reads_correctly_or_is_one_error_line(
    tmp_path: Path, reader: str, data: st.DataObject
) -> None:
    written, where, read = DOCUMENTS[reader]
    record = written(tmp_path)
    how, raw = data.draw(damaged(record), label="damage")
    path = tmp_path / where
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(raw)
    reading = refused_or_read(reader, lambda: read(tmp_path), path)
    if how == "same":
        assert reading is not None, "a record as k26ctl writes it must read back"
    if reading is not None:
        _encodable(reading)


def test_an_untouched_document_reads_back_equal(tmp_path: Path) -> None:
    from k26ctl.bisect.session import Session, SessionSpec

    session = Session("s", tmp_path)
    spec = SessionSpec(mode="numeric", profile="p.yaml", param="k", candidates=[1, 2], created=5.0, cwd="/w")
    session.create(spec)
    assert session.spec() == spec and session.outcome() is None
    session.save_outcome({"status": "found"})
    assert session.spec() == spec and session.outcome() == {"status": "found"}


# ---- JSON Lines readers ------------------------------------------------------------------------------


def _bisect_lines() -> list[dict[str, Any]]:
    from k26ctl.bisect.session import StepRecord
    from k26ctl.search.verdict import Verdict

    out: list[dict[str, Any]] = []
    for step, (value, verdict) in enumerate([(7, Verdict.GOOD), (9, Verdict.BAD), (8, Verdict.SKIP)], 1):
        out.append({"event": "start", "step": step, "assignment": {"k": value}, "purpose": "search"})
        record = StepRecord(step, {"k": value}, verdict, 1.5, True, ["good"], "ok")
        out.append({**record.to_json(), "time": 5.0})  # a fixed time: the same inputs every run
    return out


def _sweep_lines() -> list[dict[str, Any]]:
    from k26ctl.sweep.load import LevelResult
    from k26ctl.sweep.state import PointRecord

    level = LevelResult(4, 16, 0, 120.0, 2.5, 30.0, 90.0, 8.0, 20.0, 12.0)
    out: list[dict[str, Any]] = []
    for number, value in enumerate([7, 8, 9], 1):
        out.append({"event": "start", "number": number, "assignment": {"k": value}, "role": "search"})
        point = PointRecord(number, {"k": value}, "search", "", True, True, False, 3.0, "", [level])
        out.append({**point.to_json(), "time": 5.0})
    return out


def _history_lines() -> list[dict[str, Any]]:
    from k26ctl.deploy.history import DeployRecord

    return [
        DeployRecord.from_json(
            {"time": f"t{i}", "verdict": "ok", "load_seconds": 3.5, "smoke": {"ran": True, "passed": True}}
        ).to_json()
        for i in range(4)
    ]


def _finish_lines(lines: list[dict[str, Any]], kind: str) -> list[int]:
    return [n for n, record in enumerate(lines, 1) if record.get("event") == kind]


@STATE
@given(data=st.data())
def test_a_damaged_bisect_log_record_never_hides_the_others(tmp_path: Path, data: st.DataObject) -> None:
    from k26ctl.bisect.session import Session, StepRecord
    from k26ctl.search.verdict import Verdict

    session = Session("s", tmp_path)
    session.create(_bisect_session_spec())
    records = _bisect_lines()
    target = data.draw(st.integers(0, len(records) - 1), label="line")
    how, raw = data.draw(damaged(records[target]), label="damage")
    lines = [json.dumps(r).encode() for r in records]
    lines[target] = raw.replace(b"\n", b" ")
    session.log_path.write_bytes(b"\n".join(lines) + b"\n")
    read = refused_or_read("bisect log", session.read_steps, session.log_path)
    if read is None:  # the whole file refused: not UTF-8
        return
    untouched = [n for n in _finish_lines(records, "finish") if n != target + 1]
    assert {s.step for s in read.items} >= {records[n - 1]["step"] for n in untouched}
    for step in read.items:
        assert isinstance(step, StepRecord) and isinstance(step.verdict, Verdict)
        assert isinstance(step.assignment, dict) and isinstance(step.seconds, float)
        _encodable(step)
    for problem in read.problems:
        assert problem.where == f"{session.log_path}:{target + 1}", problem
    if how == "same":
        assert not read.problems and len(read.items) == 3
    steps = refused_or_read("bisect log (resume)", session.finished_steps, session.log_path)
    assert (steps is None) == bool(read.problems)


def _bisect_session_spec() -> Any:
    from k26ctl.bisect.session import SessionSpec

    return SessionSpec(
        mode="numeric", profile="p.yaml", param="k", candidates=[7, 8, 9], deploy=False, created=5.0, cwd="/w"
    )


@STATE
@given(data=st.data())
def test_a_damaged_sweep_log_record_never_hides_the_others(tmp_path: Path, data: st.DataObject) -> None:
    from k26ctl.sweep.load import LevelResult
    from k26ctl.sweep.state import SweepSession

    session = SweepSession("s", tmp_path)
    records = _sweep_lines()
    target = data.draw(st.integers(0, len(records) - 1), label="line")
    how, raw = data.draw(damaged(records[target]), label="damage")
    lines = [json.dumps(r).encode() for r in records]
    lines[target] = raw.replace(b"\n", b" ")
    tmp_path.mkdir(exist_ok=True)
    session.log_path.write_bytes(b"\n".join(lines) + b"\n")
    read = refused_or_read("sweep log", session.read_points, session.log_path)
    if read is None:
        return
    untouched = [n for n in _finish_lines(records, "point") if n != target + 1]
    assert {p.number for p in read.items} >= {records[n - 1]["number"] for n in untouched}
    for point in read.items:
        assert all(isinstance(level, LevelResult) for level in point.levels)
        assert all(isinstance(level.output_tokens_per_s, float) for level in point.levels)
        _encodable(point)
    if how == "same":
        assert not read.problems and len(read.items) == 3


@STATE
@given(data=st.data())
def test_a_damaged_deploy_history_line_is_skipped_and_named(data: st.DataObject) -> None:
    from k26ctl.deploy.history import last_load_seconds, read_records

    records = _history_lines()
    target = data.draw(st.integers(0, len(records) - 1), label="line")
    how, raw = data.draw(damaged(records[target]), label="damage")
    lines = [json.dumps(r) for r in records]
    lines[target] = raw.decode("utf-8", "replace").replace("\n", " ")  # as read_history decodes
    TRIED["deploy history"] += 1
    read = read_records("\n".join(lines) + "\n", "host:/var/lib/k26ctl/s/history.jsonl")
    assert len(read.items) >= len(records) - 1
    for record in read.items:
        assert record.load_seconds is None or isinstance(record.load_seconds, float)
        assert isinstance(record.kind, str) and isinstance(record.verdict, str)
        assert record.smoke_passed in (True, False, None)
        _encodable(record)
    for problem in read.problems:
        assert problem.one_line().startswith(f"host:/var/lib/k26ctl/s/history.jsonl:{target + 1}: ")
        assert "\n" not in problem.one_line()
    last_load_seconds(read.items)
    if how == "same":
        assert not read.problems and len(read.items) == len(records)


# ---- through the CLI --------------------------------------------------------------------------------


@pytest.fixture()
def finished_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A real bisect session (--no-deploy, --run judging the value), finished; its log path."""
    from tests.support.cli import run_in_process

    from .helpers import LAB_PROFILES

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    search = ["--param", "spec.ddtree.budget", "--good", "7", "--bad", "16", "--no-deploy"]
    profile = str(LAB_PROFILES / "ddtree-b7.yaml")
    run = run_in_process(
        ["bisect-config", profile, *search, "--run", 'test "$K26_BISECT_VALUE" -le 11', "--yes"]
    )
    assert run.returncode == 0, run.output[-2000:]
    return tmp_path / "state" / "k26ctl" / "bisect" / "default.log.jsonl"


def test_bisect_config_log_after_a_hand_edit_names_the_file_and_record(finished_session: Path) -> None:
    from tests.support.cli import run_in_process

    from .helpers import assert_clean_failure

    lines = finished_session.read_text().splitlines()
    finish = next(n for n, line in enumerate(lines) if '"event":"finish"' in line)
    lines[finish] = (
        lines[finish]
        .replace('"verdict":"good"', '"verdict":"maybe"')
        .replace('"verdict":"bad"', '"verdict":"maybe"')
    )
    finished_session.write_text("\n".join(lines) + "\n")
    run = run_in_process(["bisect-config", "log"])
    assert_clean_failure(run, (78,))
    errors = [line for line in run.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        f"error: bisect log {finished_session}:{finish + 1}: verdict: Input should be 'good', 'bad' or 'skip'"
    ]
    assert "bisect-config reset" in run.stderr
    # the other steps are still shown
    assert run.stdout.count("# k26-bisect-step ") == sum('"event":"finish"' in line for line in lines) - 1


_ORIGINAL_LOGS: dict[str, bytes] = {}


@STATE
@given(data=st.data())
def test_bisect_config_log_never_crashes_on_a_damaged_log(
    finished_session: Path, data: st.DataObject
) -> None:
    from tests.support.cli import run_in_process

    from .helpers import assert_clean_failure

    original = _ORIGINAL_LOGS.setdefault(str(finished_session), finished_session.read_bytes())
    lines = original.split(b"\n")[:-1]
    target = data.draw(st.integers(0, len(lines) - 1), label="line")
    how, raw = data.draw(damaged(json.loads(lines[target])), label="damage")
    lines[target] = raw.replace(b"\n", b" ")
    finished_session.write_bytes(b"\n".join(lines) + b"\n")
    TRIED["bisect-config log (CLI)"] += 1
    run = run_in_process(["bisect-config", "log"])
    assert_clean_failure(run, (0, 78))
    if run.returncode == 78:
        assert str(finished_session) in run.stderr
    run.stdout.encode("utf-8")
    if how == "same":
        assert run.returncode == 0


# ---- foreign text: the decoding layer ---------------------------------------------------------------


@STATE
@given(
    parts=st.lists(
        st.sampled_from(['"\\ud800"', '"a\\udfffb"', '"\\ud83d\\ude00"', '"\\u0000"', '"x"', "1", "null"])
        | hostile_text.map(lambda t: json.dumps(t, ensure_ascii=False)),
        max_size=6,
    ),
    as_bytes=st.booleans(),
)
def test_every_string_jsonsafe_hands_over_is_encodable(parts: list[str], as_bytes: bool) -> None:
    from k26ctl import jsonsafe

    text = "[" + "".join(f"{part}, " for part in parts) + '{"\\ud800key": "v"}]'
    TRIED["jsonsafe"] += 1
    try:
        decoded = jsonsafe.decode(text.encode("utf-8", "surrogatepass") if as_bytes else text)
    except jsonsafe.JSONRefused:
        assert as_bytes  # raw surrogates in bytes are not UTF-8; escapes are fine
        return
    _encodable(decoded.value)
    escaped = text.count("\\ud800") + text.count("\\udfff")
    assert decoded.surrogates_replaced >= escaped
    assert '"\\ud83d\\ude00"' not in parts or "\U0001f600" in decoded.value  # a real pair is kept


@STATE
@given(value=hostile_text)
def test_yaml_escapes_of_surrogates_are_made_encodable(value: str) -> None:
    from k26ctl import yamlsafe

    TRIED["yamlsafe"] += 1
    loaded = yamlsafe.load(f'key: "\\ud800{json.dumps(value)[1:-1]}"\n')
    _encodable(loaded)
    assert loaded["key"].startswith("\ufffd")


def test_api_keys_that_a_header_cannot_carry_are_config_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    from k26ctl.inputs import api_key

    for bad in ("kéy", "a\nb", "key\udcff"):
        monkeypatch.setenv("K26_TEST_KEY", bad)
        with pytest.raises(ConfigError, match="K26_TEST_KEY holds characters an HTTP header cannot carry"):
            api_key("K26_TEST_KEY")
    monkeypatch.setenv("K26_TEST_KEY", "sk-abc_123")
    assert api_key("K26_TEST_KEY") == "sk-abc_123"


# ---- no HOME and no passwd entry -----------------------------------------------------------------------


def _as_unknown_user(args: list[str], env: dict[str, str]) -> Any:
    """`k26ctl ARGS` as uid 54321, which has no passwd entry, with nothing but `env` (no HOME): a
    container run with an arbitrary uid, or a systemd unit with DynamicUser=. A user namespace maps
    the uid, so file access is unchanged."""
    import shutil
    import subprocess
    import sys

    from .helpers import REPO

    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("unshare is not installed")
    argv = [unshare, "--user", "--map-user=54321", "--map-group=54321"]
    probe = subprocess.run([*argv, "true"], capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        pytest.skip(f"no user namespaces here: {probe.stderr.strip()}")
    base = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [
            *argv,
            "env",
            "-i",
            *(f"{k}={v}" for k, v in {**base, **env}.items()),
            sys.executable,
            "-m",
            "k26ctl",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )


@pytest.mark.timeout(300)
def test_no_home_and_no_passwd_entry_is_a_clear_error_then_the_xdg_chain_works(tmp_path: Path) -> None:
    for args in (["lab", "host", "status", "-n", "k26h-nohome"], ["bisect-config", "log"]):
        proc = _as_unknown_user(args, {})
        assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
        assert proc.returncode == 78, (args, proc.returncode, proc.stderr[-2000:])
        assert proc.stderr.startswith(
            "error: no directory to keep k26ctl's state in: XDG_STATE_HOME and STATE_DIRECTORY are unset "
            "and there is no home directory (HOME unset, no passwd entry for uid 54321)"
        ), proc.stderr
        assert "hint: set XDG_STATE_HOME" in proc.stderr
    # systemd's StateDirectory= (DynamicUser=): the state lives there
    unit_state = tmp_path / "unit-state"
    unit_state.mkdir()
    proc = _as_unknown_user(
        ["lab", "host", "status", "-n", "k26h-nohome"], {"STATE_DIRECTORY": str(unit_state)}
    )
    assert proc.returncode == 1 and "k26h-nohome: down" in proc.stdout + proc.stderr, proc.stderr[-2000:]
    proc = _as_unknown_user(["bisect-config", "log"], {"STATE_DIRECTORY": str(unit_state)})
    assert (
        proc.returncode == 2 and f"no bisect session 'default' in {unit_state}/k26ctl/bisect" in proc.stderr
    )


@STATE
@given(data=st.data())
def test_a_damaged_watch_history_line_never_hides_the_others(tmp_path: Path, data: st.DataObject) -> None:
    from k26ctl.watch.store import WatchStore

    records: list[dict[str, Any]] = [
        {"from": "unknown", "to": "healthy", "time": 1.0},
        {"from": "healthy", "to": "failing"},
    ]
    target = data.draw(st.integers(0, len(records) - 1), label="line")
    how, raw = data.draw(damaged(records[target]), label="damage")
    lines = [json.dumps(r).encode() for r in records]
    lines[target] = raw.replace(b"\n", b" ")
    store = WatchStore(tmp_path)
    store.history.write_bytes(b"\n".join(lines) + b"\n")
    read = refused_or_read("watch history", store.read_history, store.history)
    assert read is not None, "a history is shown, never refused"
    assert all(isinstance(item, dict) for item in read)
    for item in read:
        _encodable(item)
    untouched = records[1 - target]
    assert untouched in read
    if how == "same":
        assert read == records
