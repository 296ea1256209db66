"""The shared JSON Lines event log and session lock (bisect and sweep both persist through it)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from k26ctl.errors import ConfigError, K26Error
from k26ctl.search.eventlog import EventLog, exclusive, first_wins


class Refused(K26Error):
    exit_code = 1


def write_lines(path: Path, *lines: str) -> None:
    path.write_text("".join(lines), encoding="utf-8")


def test_missing_log_has_no_records(tmp_path: Path) -> None:
    assert EventLog(tmp_path / "none.log.jsonl", what="test log").records() == []


def test_torn_last_line_is_ignored_and_cut_before_the_next_append(tmp_path: Path) -> None:
    path = tmp_path / "s.log.jsonl"
    write_lines(path, '{"event":"start","step":1}\n', '{"event":"finish","st')
    log = EventLog(path, what="test log")
    assert log.records() == [{"event": "start", "step": 1}]
    log.append({"event": "start", "step": 2})
    assert path.read_text(encoding="utf-8").splitlines() == [
        '{"event":"start","step":1}',
        '{"event":"start","step":2}',
    ]
    assert [r["step"] for r in log.records()] == [1, 2]


def test_corrupt_middle_line_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "s.log.jsonl"
    write_lines(path, '{"event":"start","step":1}\n', "garbage\n", '{"event":"finish","step":1}\n')
    with pytest.raises(K26Error) as caught:
        EventLog(path, what="test log").records()
    assert caught.value.message == f"test log {path}:2: not JSON (Expecting value at line 1 column 1)"
    assert caught.value.hint == "remove the line or the session"
    assert caught.value.exit_code == 78


def test_blank_lines_are_skipped_and_a_record_that_is_not_an_object_is_named(tmp_path: Path) -> None:
    path = tmp_path / "s.log.jsonl"
    write_lines(path, "\n", '{"event":"start","step":1}\n')
    assert EventLog(path, what="test log").records() == [{"event": "start", "step": 1}]
    write_lines(path, "\n", "[1, 2]\n", '{"event":"start","step":1}\n')
    with pytest.raises(ConfigError) as caught:
        EventLog(path, what="test log").records()
    assert caught.value.message == f"test log {path}:2: a JSON list, not an object"
    read = EventLog(path, what="test log").read(lambda record: dict)
    assert read.items == [{"event": "start", "step": 1}]  # the rest is still read


def test_interrupted_is_the_last_start_without_its_end(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "s.log.jsonl", what="test log")
    assert log.interrupted("start", "point", "number") is None
    log.append({"event": "start", "number": 1})
    log.append({"event": "point", "number": 1})
    assert log.interrupted("start", "point", "number") is None
    log.append({"event": "start", "number": 2})
    assert log.interrupted("start", "point", "number") == {"event": "start", "number": 2}
    log.append({"event": "point", "number": 1})  # an end for another start does not close it
    assert log.interrupted("start", "point", "number") == {"event": "start", "number": 2}
    log.append({"event": "point", "number": 2})
    assert log.interrupted("start", "point", "number") is None


def test_appended_records_are_one_compact_json_line_each(tmp_path: Path) -> None:
    path = tmp_path / "s.log.jsonl"
    EventLog(path, what="test log").append({"event": "start", "value": Path("/x")})
    assert [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()] == [
        {"event": "start", "value": "/x"}
    ]


def test_first_wins_keeps_order_and_the_first_duplicate() -> None:
    items = [("a", 1), ("b", 2), ("a", 3), ("c", 4), ("b", 5)]
    assert first_wins(items, lambda item: item[0]) == [("a", 1), ("b", 2), ("c", 4)]


def test_lock_is_refused_while_held_and_free_again_after(tmp_path: Path) -> None:
    lock = tmp_path / "state" / "s.lock"

    refused = Refused("session 's' is in use", "wait for it")
    with exclusive(lock, refused):
        assert lock.parent.is_dir()
        # a second open file description conflicts under flock, even in the same process
        with pytest.raises(Refused) as caught, exclusive(lock, refused):
            pass
        assert caught.value.message == "session 's' is in use"
    with exclusive(lock, refused):
        pass


def test_a_fifo_in_place_of_the_log_is_refused_not_read(tmp_path: Path) -> None:
    path = tmp_path / "s.log.jsonl"
    os.mkfifo(path)
    with pytest.raises(ConfigError) as caught:  # reading it would block until a writer appears
        EventLog(path, what="test log").records()
    assert "test log" in caught.value.message
    assert caught.value.exit_code == 78


def test_nesting_past_the_limit_in_a_middle_line_is_the_not_json_error(tmp_path: Path) -> None:
    path = tmp_path / "s.log.jsonl"
    write_lines(path, "[" * 5000 + "]" * 5000 + "\n", '{"event":"start","step":1}\n')
    with pytest.raises(K26Error) as caught:
        EventLog(path, what="test log").records()
    assert caught.value.message == f"test log {path}:1: nested deeper than 64 levels"
