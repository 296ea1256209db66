"""The one place that speaks to the SGLang router (`sglang-router` 0.3.x admin API).

Facts this adapter relies on (checked against sglang-router 0.3.2 on loopback):
- `POST /workers {"url"}` answers 202 with a `worker_id` and registers in the background; a 202 is
  not success (a URL already listed also gets 202 and its job then fails). Success is the URL listed
  in `GET /workers` with `is_healthy: true`.
- `GET /workers/{uuid}` shows `job_status` while the router remembers the job (`failed` + message).
- `DELETE /workers/{uuid}` (a URL instead of a UUID is a 400) answers 202; the worker leaves the list
  within milliseconds. Re-adding a URL gives a new UUID, so the UUID is looked up by URL every time.
- The router keeps its worker list in memory only: after a restart it lists nothing.
- A router that does not answer (restarting) is retried until the operation's own deadline.
- Admin routes take `Authorization: Bearer KEY` when the router runs with control-plane keys.

Every request goes through `httpsafe.BoundedClient` (a total deadline and a body cap), bodies are
parsed by `jsonsafe` and checked against the pydantic shapes below; an answer of another shape is a
`RouterError` naming the field. Strings the router supplies (job messages) are sanitised before they
reach a message.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Self, TypeVar

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from k26ctl.errors import K26Error, UnreachableError
from k26ctl.httpsafe import BodyTooLarge, BoundedClient, BoundedResponse, HttpError
from k26ctl.termsafe import clean

T = TypeVar("T")

MAX_ADMIN_BODY = 4 << 20  # a worker list of a few hundred entries is tens of KB


class _Shape(BaseModel):
    model_config = ConfigDict(extra="ignore")


class _WorkerEntry(_Shape):
    id: str = Field(min_length=1, max_length=200)
    url: str = Field(min_length=1, max_length=2048)
    is_healthy: bool | None = None
    load: int | None = Field(default=None, ge=0)


class _WorkerList(_Shape):
    workers: list[_WorkerEntry]


class _Accepted(_Shape):
    worker_id: str | None = Field(default=None, max_length=200)


class _JobStatus(_Shape):
    job_status: dict[str, Any] | None = None


S = TypeVar("S", bound=_Shape)


class RouterError(K26Error):
    """The router refused or failed an admin operation (it answered, but not as needed)."""


@dataclass(frozen=True)
class Worker:
    id: str
    url: str
    healthy: bool  # the gateway routes to it
    load: int = 0  # requests the gateway counts on it
    status: str = ""  # the gateway's own word for it (SMG: pending, ready, not_ready, failed, draining)
    priority: int | None = None
    labels: dict[str, str] | None = None

    @property
    def draining(self) -> bool:
        """Out of rotation but still listed while its requests finish (SMG's drain window)."""
        return self.status == "draining"


def normalize_url(url: str) -> str:
    """Worker URLs compare without a trailing slash (the router lists them as given)."""
    return url.rstrip("/")


class Router:
    """Admin client for one sglang-router 0.3.x. Every request has its own deadline (`timeout`).
    The roll's gateway port: `workers`, `add`, `remove`, `take_out`, `in_flight`."""

    kind = "sglang-router"
    detected = False  # set by the opener when the kind was asked of the gateway, not named
    shape = "0.3.x"
    speaks = "the sglang-router 0.3.x admin API"

    def __init__(
        self,
        url: str,
        *,
        admin_key: str | None = None,
        timeout: float = 5.0,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.url = normalize_url(url)
        headers = {"Authorization": f"Bearer {admin_key}"} if admin_key else {}
        self._client = BoundedClient(
            self.url, timeout=timeout, max_body=MAX_ADMIN_BODY, headers=headers, transport=transport
        )
        self._sleep = sleep
        self._clock = clock

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- raw calls ------------------------------------------------------------------------------

    def _call(self, method: str, path: str, *, json: Any = None) -> BoundedResponse:
        try:
            response = self._client.request(method, path, json=json)
        except BodyTooLarge as exc:
            raise RouterError(
                f"router {self.url}: {method} {path}: {exc}", "is router.url really the SGLang router?"
            ) from None
        except HttpError as exc:
            raise UnreachableError(
                f"router {self.url} did not answer {method} {path}: {exc}",
                "check the fleet's router.url (and its SSH forward), or start the router",
            ) from None
        if response.status_code in (401, 403):
            raise RouterError(
                f"router {self.url} refused {method} {path} ({response.status_code})",
                "export the admin key in the variable named by router.admin_key_env",
                exit_code=77,
            )
        return response

    def _parse(self, response: BoundedResponse, shape: type[S], what: str) -> S:
        """The body in `shape`, or a RouterError naming what is wrong (never a traceback)."""
        try:
            return shape.model_validate(response.json())
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"]) or "body"
            problem = f"{where}: {err['msg']}"
        except ValueError as exc:  # not JSON, or JSON beyond jsonsafe's limits
            problem = f"not JSON ({exc})"
        raise RouterError(
            f"router {self.url}: {what} is not the {self.shape} shape ({clean(problem, limit=200)})",
            f"k26ctl speaks {self.speaks} here: check the fleet's router.kind",
        )

    def alive(self) -> bool:
        """The router process answers (its `/liveness`); says nothing about workers."""
        try:
            return self._client.request("GET", "/liveness", timeout=2.0).status_code == 200
        except HttpError:
            return False

    def workers(self) -> list[Worker]:
        response = self._call("GET", "/workers")
        if response.status_code != 200:
            raise RouterError(f"router {self.url}: GET /workers answered {response.status_code}")
        listed = self._parse(response, _WorkerList, "GET /workers")
        return [
            Worker(id=w.id, url=normalize_url(w.url), healthy=bool(w.is_healthy), load=w.load or 0)
            for w in listed.workers
        ]

    def find(self, url: str) -> Worker | None:
        wanted = normalize_url(url)
        return next((w for w in self.workers() if w.url == wanted), None)

    def job_status(self, worker_id: str) -> dict[str, Any] | None:
        response = self._call("GET", f"/workers/{worker_id}")
        if response.status_code != 200:
            return None
        try:
            return _JobStatus.model_validate(response.json()).job_status
        except ValueError:  # ValidationError is one too: a job status of another shape says nothing
            return None

    def _register(self, url: str, deadline: float) -> str:
        """POST /workers (retried while the router restarts); the job's worker id ('' if none)."""
        response = self._until(deadline, lambda: self._call("POST", "/workers", json={"url": url}))
        if response.status_code not in (200, 201, 202):
            raise RouterError(f"router {self.url}: POST /workers {url} answered {response.status_code}")
        if not response.body.strip():
            return ""
        return self._parse(response, _Accepted, "POST /workers").worker_id or ""

    def _until(self, deadline: float, call: Callable[[], T], interval: float = 0.2) -> T:
        """`call()`, retried while the router does not answer (a restart takes a second or two)."""
        while True:
            try:
                return call()
            except UnreachableError:
                if self._clock() >= deadline:
                    raise
                self._sleep(interval)

    # ---- operations that wait for their effect --------------------------------------------------

    def add(
        self,
        url: str,
        *,
        timeout: float = 60.0,
        interval: float = 0.2,
        settings: dict[str, Any] | None = None,
    ) -> Worker:
        """Register `url` and wait until it is listed and healthy. A failed registration job with the
        worker not listed, or the deadline, is an error (the caller decides what to do with it).
        `settings` (what `take_out` kept) mean nothing to 0.3.x: k26ctl sets none there."""
        url = normalize_url(url)
        deadline = self._clock() + timeout
        worker_id = self._register(url, deadline)
        last_job: dict[str, Any] | None = None
        while True:
            try:
                listed = self.find(url)
            except UnreachableError:
                if self._clock() >= deadline:
                    raise
                # the router restarted (it forgets every worker and pending job): register again
                self._sleep(interval)
                worker_id = self._register(url, deadline)
                continue
            if listed is not None and listed.healthy:
                return listed
            if worker_id and listed is None:
                last_job = self.job_status(worker_id) or last_job
                if last_job and last_job.get("status") == "failed":
                    message = clean(last_job.get("message") or "job failed", limit=300)
                    raise RouterError(f"router {self.url} did not register {url}: {message}")
            if self._clock() >= deadline:
                state = "listed but not healthy" if listed else "not listed"
                raise RouterError(
                    f"router {self.url}: {url} {state} {timeout:g} s after POST /workers",
                    "the worker must answer /health 200 from the router's side",
                )
            self._sleep(interval)

    def remove(self, url: str, *, timeout: float = 10.0, interval: float = 0.05) -> bool:
        """Take `url` out of rotation and confirm it left the list. False when it was not listed."""
        url = normalize_url(url)
        deadline = self._clock() + timeout
        listed = self._until(deadline, lambda: self.find(url))
        if listed is None:
            return False
        response = self._until(deadline, lambda: self._call("DELETE", f"/workers/{listed.id}"))
        if response.status_code not in (200, 202, 204, 404):
            raise RouterError(
                f"router {self.url}: DELETE /workers/{listed.id} answered {response.status_code}"
            )
        while self._until(deadline, lambda: self.find(url)) is not None:
            if self._clock() >= deadline:
                raise RouterError(f"router {self.url}: {url} still listed {timeout:g} s after DELETE")
            self._sleep(interval)
        return True

    def take_out(self, url: str, *, timeout: float = 10.0, settle: float = 0.0) -> dict[str, Any] | None:
        """Stop routing to `url`: on 0.3.x a DELETE, gone at once (the router keeps no drain window).
        Returns the worker's settings to restore on `add` ({} here), None when it was not listed."""
        return {} if self.remove(url, timeout=timeout) else None

    def in_flight(self, url: str) -> int | None:
        """The gateway's own count of requests still running on a worker taken out. 0.3.x forgets a
        worker at DELETE, so it never knows: the roll reads the worker's own load instead."""
        return None
