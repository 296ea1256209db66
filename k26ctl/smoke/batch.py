"""Scoring many texts: in this process for a few, on every core for many, in input order.

Worker processes each read the word lists once; texts travel in chunks and at most a few chunks per
worker are in flight, so a long input is consumed as it is scored (bounded memory) and the verdicts
come back in the order the texts went in.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from itertools import islice
from typing import NamedTuple

from k26ctl.smoke.detectors import TextVerdict, preload, score_text


class Request(NamedTuple):
    text: str
    prompt: str | None = None
    kind: str | None = None
    finish_reason: str | None = None


CHUNK = 64  # texts per task: large enough that pickling and scheduling cost little per text
IN_FLIGHT_PER_WORKER = 4
PARALLEL_FROM = 4 * CHUNK  # fewer texts than this are scored in this process (workers cost a start-up)


def default_workers() -> int:
    """$K26CTL_SCORE_WORKERS when set, else the CPUs this process may run on."""
    configured = os.environ.get("K26CTL_SCORE_WORKERS", "").strip()
    if configured.isascii() and configured.isdigit() and int(configured) > 0:  # int("²") fails
        return int(configured)
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def score_many(requests: Iterable[Request], workers: int | None = None) -> Iterator[TextVerdict]:
    """Verdicts for `requests`, in order. With one worker, or while fewer than PARALLEL_FROM texts have
    come in, everything runs here; otherwise chunks go to a pool of `workers` processes."""
    workers = default_workers() if workers is None else max(1, workers)
    stream = iter(requests)
    head = list(islice(stream, PARALLEL_FROM))
    if workers == 1 or len(head) < PARALLEL_FROM:
        yield from (_score(r) for r in head)
        yield from (_score(r) for r in stream)
        return
    chunks = _chunks(head, stream)
    preload()  # before the pool forks its workers, so that they share it
    with ProcessPoolExecutor(max_workers=workers) as pool:
        pending: deque[Future[list[TextVerdict]]] = deque()
        for chunk in chunks:
            pending.append(pool.submit(_score_chunk, chunk))
            if len(pending) >= workers * IN_FLIGHT_PER_WORKER:
                yield from pending.popleft().result()
        while pending:
            yield from pending.popleft().result()


def _chunks(head: list[Request], rest: Iterator[Request]) -> Iterator[list[Request]]:
    for start in range(0, len(head), CHUNK):
        yield head[start : start + CHUNK]
    while chunk := list(islice(rest, CHUNK)):
        yield chunk


def _score(request: Request) -> TextVerdict:
    return score_text(request.text, request.prompt, request.kind, request.finish_reason)


def _score_chunk(chunk: list[Request]) -> list[TextVerdict]:
    return [_score(r) for r in chunk]
