"""Bounded HTTP: every request k26ctl sends to a server has a total deadline and a body-size cap.

httpx's timeouts apply per socket operation, so a server that sends one byte a second never trips
them, and its body is read whole, so an endless or compressed body fills memory. `BoundedClient`
closes both holes for every caller (smoke, readiness probes, probes, router checks):

* **Deadline, total.** The time left of the current request is kept in a thread-local; the network
  streams under httpx clamp each read, write and connect to it, so the request ends at its deadline
  whether the server is silent, drips headers or drips the body.
* **Body cap, after decompression.** The body is streamed raw and inflated here with a bounded
  `zlib` decompressor (gzip and deflate; other encodings are refused, and only those two are
  offered), so a gzip bomb costs at most `max_body` bytes of memory.

Failures are `HttpError` subclasses (`DeadlineExceeded`, `TransportFailure`, `BodyTooLarge`,
`BadEncoding`); callers map them onto their own errors. `parse_json` turns a body into JSON with
the recursion and number-size limits of `k26ctl.jsonsafe`.
"""

from __future__ import annotations

import ssl
import threading
import time
import zlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import httpcore
import httpx

_INFLATE_STEP = 1 << 20  # inflate at most this much per call: peak memory is the cap plus one step
DEFAULT_MAX_BODY = 8 << 20  # a chat completion or a model list is a few KB; 8 MB is generous
DEFAULT_MAX_LINE = 1 << 20  # one server-sent event of a streamed completion is a few hundred bytes
_ACCEPT_ENCODING = "gzip, deflate"


class HttpError(Exception):
    """The request did not produce a usable bounded answer."""


class DeadlineExceeded(HttpError):
    """No complete answer within the request's total deadline."""


class TransportFailure(HttpError):
    """Connecting or talking to the server failed (refused, reset, DNS, TLS)."""


class BodyTooLarge(HttpError):
    """The (decompressed) body is larger than the cap."""


class BadEncoding(HttpError):
    """The body's Content-Encoding is unsupported or the compressed data is corrupt."""


@dataclass(frozen=True)
class BoundedResponse:
    status_code: int
    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict)
    elapsed: float = 0.0

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")

    def json(self) -> Any:
        """The body as JSON; `jsonsafe.JSONRefused` (a ValueError) when it is not acceptable JSON."""
        return parse_json(self.body)


def parse_json(body: bytes | str) -> Any:
    from k26ctl.jsonsafe import loads

    return loads(body)


# ---- the deadline under httpx ---------------------------------------------------------------------

_current = threading.local()


def _time_left(requested: float | None, exc: type[Exception]) -> float | None:
    deadline: float | None = getattr(_current, "deadline", None)
    if deadline is None:
        return requested
    left = deadline - time.monotonic()
    if left <= 0:
        raise exc("request deadline reached")
    return left if requested is None else min(requested, left)


class _DeadlineStream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _time_left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _time_left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        inner = self._inner.start_tls(
            ssl_context, server_hostname, _time_left(timeout, httpcore.ConnectTimeout)
        )
        return _DeadlineStream(inner)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _DeadlineBackend(httpcore.SyncBackend):
    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> httpcore.NetworkStream:
        stream = super().connect_tcp(
            host, port, _time_left(timeout, httpcore.ConnectTimeout), local_address, socket_options
        )
        return _DeadlineStream(stream)


@cache
def shared_tls_context() -> ssl.SSLContext:
    """The verifying TLS context httpx builds by default (certifi's CA bundle), built once per process.

    httpx builds it in every transport's constructor, used or not, and loading the bundle costs tens
    of milliseconds of CPU; a deploy opens a client for every readiness probe, and a probe through the
    SSH forward is plain HTTP. One context serves every connection and thread."""
    return httpx.create_ssl_context()


def deadline_transport(**kwargs: Any) -> httpx.HTTPTransport:
    """An httpx transport whose sockets obey the calling thread's request deadline."""
    kwargs.setdefault("verify", shared_tls_context())
    transport = httpx.HTTPTransport(**kwargs)
    pool = transport._pool  # httpx keeps its httpcore pool here; the backend is its only I/O seam
    if not hasattr(pool, "_network_backend"):
        raise RuntimeError("httpcore changed: cannot install the request deadline")
    pool._network_backend = _DeadlineBackend()
    return transport


@contextmanager
def _deadline(seconds: float) -> Iterator[float]:
    previous = getattr(_current, "deadline", None)
    deadline = time.monotonic() + seconds
    _current.deadline = deadline if previous is None else min(previous, deadline)
    try:
        yield _current.deadline
    finally:
        _current.deadline = previous


# ---- bounded decompression ------------------------------------------------------------------------


class _Inflater:
    """Decode a Content-Encoding chain of gzip/deflate with a hard output budget."""

    def __init__(self, encoding: str, budget: int) -> None:
        codings = [c.strip().lower() for c in encoding.split(",") if c.strip()]
        codings = [c for c in codings if c != "identity"]
        if len(codings) > 1:
            raise BadEncoding(f"stacked Content-Encoding {encoding!r} is not supported")
        self._coding = codings[0] if codings else None
        if self._coding not in (None, "gzip", "x-gzip", "deflate"):
            raise BadEncoding(f"unsupported Content-Encoding {self._coding!r}")
        self._budget = budget
        self._out = bytearray()
        self._raw_deflate_tried = False
        self._obj: Any = None
        if self._coding in ("gzip", "x-gzip"):
            self._obj = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif self._coding == "deflate":
            self._obj = zlib.decompressobj(zlib.MAX_WBITS)

    def _keep(self, data: bytes) -> None:
        if len(self._out) + len(data) > self._budget:
            raise BodyTooLarge(f"body larger than {self._budget} bytes")
        self._out += data

    def feed(self, chunk: bytes) -> None:
        if self._obj is None:
            self._keep(chunk)
            return
        data = chunk
        while data:
            room = self._budget - len(self._out) + 1  # one byte over the budget proves the overflow
            try:
                out = self._obj.decompress(data, min(room, _INFLATE_STEP))
            except zlib.error as exc:
                if self._coding == "deflate" and not self._raw_deflate_tried and not self._out:
                    # Some servers send raw deflate without the zlib header.
                    self._raw_deflate_tried = True
                    self._obj = zlib.decompressobj(-zlib.MAX_WBITS)
                    continue
                raise BadEncoding(f"corrupt {self._coding} body ({exc})") from None
            self._keep(out)
            data = self._obj.unconsumed_tail
            if self._obj.eof:
                data = self._obj.unused_data
                if not data or self._coding == "deflate":
                    return
                self._obj = zlib.decompressobj(16 + zlib.MAX_WBITS)  # the next gzip member

    def result(self) -> bytes:
        if self._obj is not None:
            self._keep(self._obj.flush(self._budget - len(self._out) + 1))
        return bytes(self._out)


# ---- the client -----------------------------------------------------------------------------------


class BoundedClient:
    """An httpx client whose every request has a total deadline and a decompressed-size cap."""

    def __init__(
        self,
        base_url: str = "",
        *,
        timeout: float = 30.0,
        max_body: int = DEFAULT_MAX_BODY,
        headers: Mapping[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        check_timeout(timeout)
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.max_body = max_body
        all_headers = {"Accept-Encoding": _ACCEPT_ENCODING, **(headers or {})}
        self._http = httpx.Client(
            base_url=self.base_url,
            headers=all_headers,
            timeout=httpx.Timeout(timeout),
            transport=transport or deadline_transport(),
            trust_env=False,  # never route a loopback or tunnelled URL through a proxy
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> BoundedClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        timeout: float | None = None,
        max_body: int | None = None,
    ) -> BoundedResponse:
        """Send one request; return status, headers and the whole (bounded) body."""
        seconds = self.timeout if timeout is None else timeout
        budget = self.max_body if max_body is None else max_body
        started = time.monotonic()
        with (
            _deadline(seconds) as deadline,
            _as_http_errors(seconds, deadline),
            self._http.stream(method, path, json=json) as response,
        ):
            inflater = _Inflater(response.headers.get("content-encoding", ""), budget)
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and inflater._coding is None and int(declared) > budget:
                raise BodyTooLarge(f"body of {declared} bytes is larger than {budget}")
            for chunk in response.iter_raw():
                inflater.feed(chunk)
                if time.monotonic() > deadline:
                    raise DeadlineExceeded(f"no complete answer within {seconds:g} s")
            body = inflater.result()
            return BoundedResponse(
                response.status_code, body, dict(response.headers), time.monotonic() - started
            )

    @contextmanager
    def stream_lines(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        timeout: float | None = None,
        max_body: int | None = None,
        max_line: int = DEFAULT_MAX_LINE,
    ) -> Iterator[StreamedResponse]:
        """Send one request and hand over its body line by line as it arrives (server-sent events).

        The same total deadline covers sending, the headers and every line the caller reads inside
        the `with` block; the body (counted as it arrives) is capped at `max_body` and each line at
        `max_line`. The stream is asked for and must be uncompressed, so each line is yielded when its
        bytes arrive and arrival times stay accurate. Errors are the `HttpError`s of `request`."""
        seconds = self.timeout if timeout is None else timeout
        budget = self.max_body if max_body is None else max_body
        with _deadline(seconds) as deadline, _as_http_errors(seconds, deadline):
            identity = {"Accept-Encoding": "identity"}
            with self._http.stream(method, path, json=json, headers=identity) as response:
                coding = response.headers.get("content-encoding", "").strip().lower()
                if coding not in ("", "identity"):
                    raise BadEncoding(f"a streamed body must not be compressed (Content-Encoding {coding!r})")
                lines = _lines(response.iter_raw(), budget, max_line, seconds, deadline)
                yield StreamedResponse(response.status_code, dict(response.headers), lines)


@dataclass(frozen=True)
class StreamedResponse:
    status_code: int
    headers: Mapping[str, str]
    lines: Iterator[str]  # without the line end; invalid UTF-8 replaced


def _lines(
    chunks: Iterator[bytes], budget: int, max_line: int, seconds: float, deadline: float
) -> Iterator[str]:
    pending = b""
    received = 0
    for chunk in chunks:
        received += len(chunk)
        if received > budget:
            raise BodyTooLarge(f"body larger than {budget} bytes")
        if time.monotonic() > deadline:
            raise DeadlineExceeded(f"no complete answer within {seconds:g} s")
        *complete, pending = (pending + chunk).split(b"\n")
        for raw in complete:
            if len(raw) > max_line:
                raise BodyTooLarge(f"line longer than {max_line} bytes")
            yield raw.rstrip(b"\r").decode("utf-8", errors="replace")
        if len(pending) > max_line:
            raise BodyTooLarge(f"line longer than {max_line} bytes")
    if pending:
        yield pending.rstrip(b"\r").decode("utf-8", errors="replace")


@contextmanager
def _as_http_errors(seconds: float, deadline: float) -> Iterator[None]:
    """httpx's exceptions (raised while connecting or while the caller reads) as `HttpError`s."""
    try:
        yield
    except httpx.TimeoutException:
        raise DeadlineExceeded(f"no complete answer within {seconds:g} s") from None
    except (httpx.TransportError, httpx.DecodingError) as exc:
        if time.monotonic() >= deadline:
            raise DeadlineExceeded(f"no complete answer within {seconds:g} s") from None
        raise TransportFailure(f"{type(exc).__name__}: {exc}") from None
    except httpx.InvalidURL as exc:
        raise TransportFailure(f"invalid URL: {exc}") from None


def check_timeout(seconds: float) -> float:
    """A usable deadline: finite, positive and below a day (NaN, inf and 1e308 are refused)."""
    if not (0 < seconds <= MAX_TIMEOUT):  # NaN fails every comparison
        raise ValueError(f"timeout must be a number of seconds in (0, {MAX_TIMEOUT:g}], got {seconds!r}")
    return seconds


MAX_TIMEOUT = 86_400.0
