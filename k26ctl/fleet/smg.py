"""The gateway adapter for SMG (`smg` 1.13.0 on the registry, the line that continues sglang-router).

Facts it relies on (each checked on 1.13.0 on loopback; file and line in docs/conformance.md):
- `POST /workers {"url", "priority", "cost"}` answers 202 with a `worker_id` and registers in
  the background; `GET /workers/{id}` shows `status` (pending, ready, not_ready, failed, draining),
  `is_healthy`, `load` (the requests SMG has in flight on it), `priority`, `cost`, `labels` and, while
  a job runs, `job_status`. Only `ready` is routed to. A URL already listed is a 409.
- `DELETE /workers/{id}` marks a ready worker `draining` (no new requests) and removes it after its
  `health.drain_settle_secs` (5 s unless set; the Python launcher has no flag for it); its `load`
  keeps counting the requests still running. A second DELETE of a worker that is not ready removes
  it at once (no drain window for it). The first removal job still runs when its window ends, and
  it removes whatever worker is registered at that URL then, a new registration included: `add`
  waits for the end of every window k26ctl opened on the URL before it registers it again.
- `PATCH /workers/{id}` changes priority, cost, labels (merged) and the health overrides, including
  `drain_settle_secs`; the health overrides are not shown by GET.
- SMG's health checker turns a worker that failed its `/health` probes ready again as soon as the
  probes pass: `/health` 200 is its only test, whatever the worker answers. With the check disabled a
  worker stays ready even while `/health` fails. A member in its deploy step is therefore kept out of
  SMG's registry altogether: there is no entry for the checker to put back.
- No routing policy reads priority or cost (round_robin spread 10/10 between priority 1 and 100), and
  labels select nothing but realtime traffic: SMG offers no knob to give a canary a smaller share.
- `GET /get_loads` carries `"version": "smg-X.Y.Z"`; sglang-router 0.3.x answers `{"workers": [...]}`.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any

from pydantic import Field

from k26ctl.errors import UnreachableError
from k26ctl.fleet.router import Router, RouterError, Worker, _Accepted, _Shape, normalize_url
from k26ctl.termsafe import clean

SMG_VERSION = "1.13.0"
DEFAULT_SETTLE = 5.0  # SMG's drain window for a worker without its own (the launcher sets none)
MAX_WINDOW = 15.0  # seconds of SMG's own count at most; the worker's own load covers a longer drain
WINDOW_MARGIN = 1.0  # the removal job runs just after its window: register only past this much more


class _SmgEntry(_Shape):
    id: str = Field(min_length=1, max_length=200)
    url: str = Field(min_length=1, max_length=2048)
    is_healthy: bool | None = None
    status: str | None = Field(default=None, max_length=40)
    load: int | None = Field(default=None, ge=0)
    priority: int | None = Field(default=None, ge=0)
    cost: float | None = None
    labels: dict[str, str] | None = None


class _SmgList(_Shape):
    workers: list[_SmgEntry]


class _Version(_Shape):
    version: str | None = Field(default=None, max_length=100)


def _worker(entry: _SmgEntry) -> Worker:
    status = entry.status or ("ready" if entry.is_healthy else "")
    return Worker(
        id=entry.id,
        url=normalize_url(entry.url),
        healthy=status == "ready",
        load=entry.load or 0,
        status=status,
        priority=entry.priority,
        labels=dict(entry.labels or {}),
    )


class SmgGateway(Router):
    """Admin client for one SMG. The HTTP plumbing (deadlines, body cap, key, retries while it
    restarts) is the router adapter's; what differs is the worker's life in the registry."""

    kind = "smg"
    shape = "SMG 1.13"
    speaks = "the SMG 1.13 worker API"

    def __init__(self, url: str, **kwargs: Any) -> None:
        super().__init__(url, **kwargs)
        self._windows: dict[str, float] = {}  # url -> when the last drain window k26ctl opened ends

    def _opened_window(self, url: str, seconds: float) -> None:
        self._windows[url] = max(self._windows.get(url, 0.0), self._clock() + seconds + WINDOW_MARGIN)

    def _await_windows(self, url: str) -> None:
        """Let an earlier removal job of `url` end before it is registered again (else that job
        removes the new registration). Bounded by MAX_WINDOW + WINDOW_MARGIN."""
        left = self._windows.pop(url, 0.0) - self._clock()
        if left > 0:
            self._sleep(left)

    def version(self) -> str:
        """`smg-1.13.0` as SMG states it in `/get_loads` ('' when it does not say)."""
        response = self._call("GET", "/get_loads")
        if response.status_code != 200:
            return ""
        return self._parse(response, _Version, "GET /get_loads").version or ""

    def workers(self) -> list[Worker]:
        response = self._call("GET", "/workers")
        if response.status_code != 200:
            raise RouterError(f"gateway {self.url}: GET /workers answered {response.status_code}")
        return [_worker(e) for e in self._parse(response, _SmgList, "GET /workers").workers]

    def _register(self, url: str, deadline: float, settings: dict[str, Any] | None = None) -> str:
        body = {**(settings or {}), "url": url}
        response = self._until(deadline, lambda: self._call("POST", "/workers", json=body))
        if response.status_code == 409:
            return ""  # already listed: the wait below decides (a leftover drain window is ended there)
        if response.status_code not in (200, 201, 202):
            raise RouterError(f"gateway {self.url}: POST /workers {url} answered {response.status_code}")
        return self._parse(response, _Accepted, "POST /workers").worker_id or ""

    def add(
        self,
        url: str,
        *,
        timeout: float = 60.0,
        interval: float = 0.2,
        settings: dict[str, Any] | None = None,
    ) -> Worker:
        """Register `url` with `settings` (priority and cost kept by `take_out`) and wait until
        SMG lists it `ready`. A failed job, or the deadline, is an error."""
        url = normalize_url(url)
        self._await_windows(url)
        deadline = self._clock() + timeout
        worker_id = self._register(url, deadline, settings)
        last_job: dict[str, Any] | None = None
        while True:
            try:
                listed = self.find(url)
            except UnreachableError:
                if self._clock() >= deadline:
                    raise
                self._sleep(interval)  # SMG restarted: it forgot every worker and job
                worker_id = self._register(url, deadline, settings)
                continue
            if listed is not None and listed.healthy:
                return listed
            if listed is not None and listed.draining:
                # a removal's drain window (not k26ctl's) still holds the URL: end it, let its job
                # end, then register anew
                self._delete(listed.id)
                self._sleep(WINDOW_MARGIN)
                worker_id = ""
            elif listed is None and not worker_id:
                worker_id = self._register(url, deadline, settings)
            elif worker_id and listed is None:
                last_job = self.job_status(worker_id) or last_job
                if last_job and last_job.get("status") == "failed":
                    message = clean(last_job.get("message") or "job failed", limit=300)
                    raise RouterError(f"gateway {self.url} did not register {url}: {message}")
            if self._clock() >= deadline:
                state = f"listed as {listed.status or 'unhealthy'}" if listed else "not listed"
                raise RouterError(
                    f"gateway {self.url}: {url} {state} {timeout:g} s after POST /workers",
                    "the worker must answer /health 200 from the gateway's side",
                )
            self._sleep(interval)

    def _delete(self, worker_id: str) -> None:
        response = self._call("DELETE", f"/workers/{worker_id}")
        if response.status_code not in (200, 202, 204, 404):
            raise RouterError(
                f"gateway {self.url}: DELETE /workers/{worker_id} answered {response.status_code}"
            )

    def remove(self, url: str, *, timeout: float = 10.0, interval: float = 0.05) -> bool:
        """Out of SMG's registry now: DELETE, and DELETE again once it is draining (a worker that is
        not ready leaves without a drain window). False when it was not listed."""
        url = normalize_url(url)
        deadline = self._clock() + timeout
        listed = self._until(deadline, lambda: self.find(url))
        if listed is None:
            return False
        deleted_as = ""
        while listed is not None:
            if listed.status != deleted_as:  # once per state: ready -> draining -> gone
                self._until(deadline, partial(self._delete, listed.id))
                if listed.healthy:  # a drain window opens, its own length unknown: SMG's default
                    self._opened_window(url, DEFAULT_SETTLE)
                deleted_as = listed.status
            if self._clock() >= deadline:
                raise RouterError(f"gateway {self.url}: {url} still listed {timeout:g} s after DELETE")
            self._sleep(interval)
            listed = self._until(deadline, lambda: self.find(url))
        return True

    def take_out(self, url: str, *, timeout: float = 10.0, settle: float = 0.0) -> dict[str, Any] | None:
        """Stop new requests to `url` and keep SMG counting the running ones: its drain window is set
        to `settle` seconds (MAX_WINDOW at most), then DELETE; confirmed once SMG lists it
        `draining` (or not at all). A drain longer than the window goes on on the worker's own load.
        Returns its priority and cost for `add` to restore; None when it was not listed. Labels are not
        carried over: GET shows the operator's merged with those SMG read from the worker's server
        info, and labels given at POST win over discovered ones, so re-posting them would pin the old
        server's values (its version, its limits) on the new one."""
        url = normalize_url(url)
        deadline = self._clock() + timeout
        listed = self._until(deadline, lambda: self.find(url))
        if listed is None:
            return None
        kept: dict[str, Any] = {}
        if listed.priority is not None:
            kept["priority"] = listed.priority
        cost = self._cost(listed.id)
        if cost is not None:
            kept["cost"] = cost
        window_s = min(MAX_WINDOW, float(math.ceil(settle))) if settle > 0 else DEFAULT_SETTLE
        if listed.healthy and settle > 0:
            window = {"health": {"drain_settle_secs": int(window_s)}}
            response = self._until(
                deadline, lambda: self._call("PATCH", f"/workers/{listed.id}", json=window)
            )
            if response.status_code not in (200, 202):
                raise RouterError(
                    f"gateway {self.url}: PATCH /workers/{listed.id} answered {response.status_code}"
                )
        self._until(deadline, lambda: self._delete(listed.id))
        if listed.healthy:
            self._opened_window(url, window_s)
        while True:
            now = self._until(deadline, lambda: self.find(url))
            if now is None or not now.healthy:
                return kept
            if self._clock() >= deadline:
                raise RouterError(f"gateway {self.url}: {url} still routed to {timeout:g} s after DELETE")
            self._sleep(0.05)

    def _cost(self, worker_id: str) -> float | None:
        response = self._call("GET", f"/workers/{worker_id}")
        if response.status_code != 200:
            return None
        try:
            return _SmgEntry.model_validate(response.json()).cost
        except ValueError:
            return None

    def in_flight(self, url: str) -> int | None:
        """SMG's own count of requests still running on `url` while it drains; None once it is gone
        (or listed in another state: not a drain to wait on)."""
        listed = self.find(url)
        if listed is None or not listed.draining:
            return None
        return listed.load
