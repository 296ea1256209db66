"""State changes are kept on the host beside the deploy history, and a host that cannot be written
does not stop the watcher."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from k26ctl.errors import UnreachableError
from k26ctl.remote.fake import FakeHost, prefix
from k26ctl.smoke.runner import SmokeTarget
from k26ctl.smoke.suite import load_suite
from k26ctl.watch.canary import CanarySettings, canary_suite
from k26ctl.watch.host_history import append_watch_record, read_watch_history, watch_history_path
from k26ctl.watch.loop import WatchConfig, Watcher
from k26ctl.watch.setup import _fixed
from k26ctl.watch.store import WatchStore


def test_records_are_appended_atomically_beside_the_deploy_history() -> None:
    host = FakeHost()
    host.on(prefix("mkdir"), lambda argv, data: "")
    append_watch_record(host, "sglang", {"before": "unknown", "after": "healthy"})
    append_watch_record(host, "sglang", {"before": "healthy", "after": "failing", "evidence": {"x": 1}})
    assert watch_history_path("sglang") == "/var/lib/k26ctl/sglang/watch-history.jsonl"
    assert [r["after"] for r in read_watch_history(host, "sglang")] == ["healthy", "failing"]
    host.files[watch_history_path("sglang")] += b"not json\n"
    assert len(read_watch_history(host, "sglang")) == 2


def _watcher(tmp_path: Path, on_change: Any) -> Watcher:
    suite = canary_suite(load_suite("lab"))
    target = SmokeTarget("http://127.0.0.1:9")
    config = WatchConfig(interval=0.0, canary=CanarySettings(request_timeout=5))
    return Watcher(
        lambda: _fixed(target), suite, config, WatchStore(tmp_path), label="t", on_change=on_change
    )


def test_each_confirmed_change_goes_to_the_host_hook(tmp_path: Path) -> None:
    changes: list[dict[str, Any]] = []
    watcher = _watcher(tmp_path, changes.append)
    outcome = watcher.step()
    assert outcome.state == "unreachable" and watcher.cycles == 2  # the cycle and its re-check
    assert [(c["before"], c["after"], c["target"]) for c in changes] == [("unknown", "unreachable", "t")]
    assert watcher.step().record["changed"] is False and len(changes) == 1


def test_a_host_that_cannot_be_written_is_reported_and_the_watch_goes_on(tmp_path: Path) -> None:
    def down(_change: dict[str, Any]) -> None:
        raise UnreachableError("cannot connect to gpu1", "check the host")

    watcher = _watcher(tmp_path, down)
    record = watcher.step().record
    assert record["host_history_error"] == "cannot connect to gpu1 (hint: check the host)"
    assert WatchStore(tmp_path).read_history()[0]["after"] == "unreachable"
