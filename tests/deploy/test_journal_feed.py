"""JournalFeed: lines from the follow stream, and polling from the last cursor when the stream breaks
(a dropped journalctl -f cannot be caused on demand on a real host, so a small stand-in plays it)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from k26ctl.deploy.wait import JournalFeed


@dataclass(frozen=True)
class Entry:
    cursor: str
    message: str
    timestamp_us: int = 0


class FollowThenBreak:
    """Follows two lines, then the stream breaks; journal() serves what came after."""

    def __init__(self) -> None:
        self.journal_calls: list[str | None] = []
        self.release = threading.Event()

    def follow(self, cursor: str | None = None) -> Iterator[Entry]:
        yield Entry("c1", "Started x.service.")
        yield Entry("c2", "Loading safetensors checkpoint shards:  50% Completed | 8/16")
        self.release.wait(5)
        raise ConnectionError("channel closed")

    def journal(self, cursor: str | None = None) -> list[Entry]:
        self.journal_calls.append(cursor)
        if cursor == "c2":
            return [Entry("c3", "The server is fired up and ready to roll!")]
        return []


def drain(feed: JournalFeed, until: float) -> list[str]:
    seen: list[str] = []
    while time.monotonic() < until:
        seen += [e.message for e in feed.get(0.1)]
    return seen


def test_follow_then_poll_from_the_last_cursor() -> None:
    systemd = FollowThenBreak()
    feed = JournalFeed(systemd, cursor="c0")
    first = drain(feed, time.monotonic() + 0.5)
    assert first == ["Started x.service.", "Loading safetensors checkpoint shards:  50% Completed | 8/16"]
    systemd.release.set()
    later = drain(feed, time.monotonic() + 1.5)
    assert later == ["The server is fired up and ready to roll!"]
    assert systemd.journal_calls[0] == "c2"
    # Polling is throttled: about one journal read per half second, not one per get().
    assert len(systemd.journal_calls) <= 4
    feed.stop()


class QuietFollow:
    """A followed journal with nothing new to say until released."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def follow(self, cursor: str | None = None) -> Iterator[Entry]:
        self.release.wait(120)
        yield Entry("c1", "Started x.service.")

    def journal(self, cursor: str | None = None) -> list[Entry]:
        return []


@pytest.mark.timeout(30)
def test_wake_ends_a_wait_for_entries_without_inventing_one() -> None:
    """A probe that answers wakes the readiness loop out of its wait for journal lines; without the
    wake this get() would wait its whole 120 s and the timeout would fail the test."""
    systemd = QuietFollow()
    feed = JournalFeed(systemd, cursor=None)
    try:
        threading.Timer(0.2, feed.wake).start()
        assert feed.get(120) == []
        systemd.release.set()
        assert [e.message for e in feed.get(60)] == ["Started x.service."]
    finally:
        systemd.release.set()
        feed.stop()


class LateNotification:
    """journald has written the ready line, but its followers hear of it only in the next batch."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.journal_calls: list[str | None] = []

    def follow(self, cursor: str | None = None) -> Iterator[Entry]:
        yield Entry("c1", "Started x.service.")
        self.release.wait(120)

    def journal(self, cursor: str | None = None) -> list[Entry]:
        self.journal_calls.append(cursor)
        return [Entry("c2", "The server is fired up and ready to roll!")] if cursor == "c1" else []


@pytest.mark.timeout(30)
def test_read_now_finds_what_the_follower_has_not_heard_of_yet() -> None:
    systemd = LateNotification()
    feed = JournalFeed(systemd, cursor="c0")
    try:
        assert [e.message for e in feed.get(10)] == ["Started x.service."]
        assert [e.message for e in feed.read_now()] == ["The server is fired up and ready to roll!"]
        assert systemd.journal_calls == ["c1"]  # read from where the follower had got to
    finally:
        systemd.release.set()
        feed.stop()
