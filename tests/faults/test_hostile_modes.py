"""The fake SGLang server's hostile modes against the bounded HTTP client, the smoke CLI and the readiness
prober: each ends with a clear error or a finding, a bounded number of bytes read, and no traceback.
Time and memory per mode are measured by benchmarks/hostile_server.py, not asserted here."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from k26ctl import httpsafe
from k26ctl.errors import UnreachableError
from k26ctl.smoke.client import ResponseError, SGLangClient
from tests.support.cli import CliResult, run_in_process
from tests.support.fake_sglang import ESCAPES, HOSTILE_MODES, FakeSGLang, start_in_thread

SUITE = str(Path(__file__).with_name("hostile_suite.yaml"))


@pytest.fixture()
def server(request: pytest.FixtureRequest) -> Iterator[FakeSGLang]:
    srv = start_in_thread(request.param)
    yield srv
    srv.hung.set()
    srv.shutdown()
    srv.server_close()


def _url(srv: FakeSGLang) -> str:
    return f"http://127.0.0.1:{srv.server_address[1]}"


def _chat(client: SGLangClient) -> object:
    return client.chat([{"role": "user", "content": "hi"}], model="m", temperature=0.0, max_tokens=8)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("server", ["slow-headers", "slow-body"], indirect=True)
def test_a_dripping_server_hits_the_total_deadline(server: FakeSGLang) -> None:
    """Each byte arrives well inside the per-read timeout; only a total deadline ends the request."""
    with SGLangClient(_url(server), timeout=1.5) as client, pytest.raises(UnreachableError) as caught:
        _chat(client)
    assert "no complete answer within the timeout (1.5 s)" in caught.value.message


@pytest.mark.timeout(30)
@pytest.mark.parametrize("server", ["endless"], indirect=True)
def test_an_endless_body_stops_at_the_cap(server: FakeSGLang) -> None:
    cap = 1 << 20
    client = SGLangClient(_url(server), timeout=10, max_body=cap)
    with client, pytest.raises(ResponseError) as caught:
        _chat(client)
    assert f"body larger than {cap} bytes" in str(caught.value)
    server.hung.set()  # the server stops writing once the client is gone or this is set
    # What the server got into the socket is the client's reads plus kernel buffers: a few MB at most.
    assert server.sent_bytes < 64 * cap


@pytest.mark.timeout(30)
@pytest.mark.parametrize("server", ["gzip-bomb"], indirect=True)
def test_a_gzip_bomb_is_capped_after_decompression(server: FakeSGLang) -> None:
    client = SGLangClient(_url(server), timeout=10, max_body=1 << 20)
    with client, pytest.raises(ResponseError) as caught:
        _chat(client)
    assert "body larger than 1048576 bytes" in str(caught.value)


def test_the_inflater_never_holds_more_than_the_budget() -> None:
    import zlib

    bomb = zlib.compress(bytes(50 << 20), 9)
    inflater = httpsafe._Inflater("deflate", 1000)
    with pytest.raises(httpsafe.BodyTooLarge):
        inflater.feed(bomb)
    assert len(inflater._out) <= 1000
    ok = httpsafe._Inflater("gzip", 100)
    import gzip

    ok.feed(gzip.compress(b"x" * 100))
    assert ok.result() == b"x" * 100
    with pytest.raises(httpsafe.BadEncoding):
        httpsafe._Inflater("br", 100)


@pytest.mark.parametrize(
    ("server", "expected"),
    [
        ("wrong-types", "usage.completion_tokens"),
        ("huge-numbers", "number with 5000 digits"),
        ("deep-json", "nested deeper than"),
    ],
    indirect=["server"],
)
def test_wrong_shapes_are_response_errors(server: FakeSGLang, expected: str) -> None:
    with SGLangClient(_url(server), timeout=5) as client, pytest.raises(ResponseError) as caught:
        _chat(client)
    assert expected in str(caught.value)


@pytest.mark.parametrize("server", ["wrong-types"], indirect=True)
def test_wrong_generate_and_server_info_shapes(server: FakeSGLang) -> None:
    with SGLangClient(_url(server), timeout=5) as client:
        with pytest.raises(ResponseError, match="meta_info"):
            client.generate("x", temperature=0.0, max_new_tokens=4)
        with pytest.raises(ResponseError, match="version"):
            client.server_info()


@pytest.mark.parametrize("server", ["wrong-models"], indirect=True)
def test_a_model_list_of_the_wrong_shape(server: FakeSGLang) -> None:
    with SGLangClient(_url(server), timeout=5) as client, pytest.raises(ResponseError, match="data"):
        client.model_names()


def test_invalid_timeouts_are_refused() -> None:
    for bad in (-1.0, 0.0, float("nan"), float("inf"), 1e308):
        with pytest.raises(ValueError):
            httpsafe.check_timeout(bad)


def _cli_smoke(srv: FakeSGLang, *extra: str) -> CliResult:
    args = ["smoke", "--url", _url(srv), "--timeout", "1.5", "--suite", SUITE, *extra]
    run = run_in_process(args)
    assert run.exception is None, f"exception escaped the CLI: {run.exception!r}"
    return run


@pytest.mark.timeout(150)
@pytest.mark.parametrize("server", HOSTILE_MODES, indirect=True)
def test_smoke_cli_against_every_hostile_mode(server: FakeSGLang) -> None:
    """The whole smoke command: a documented exit code (1 failed, 69 unreachable), no traceback, and
    nothing of the server's escapes reaching the terminal raw."""
    proc = _cli_smoke(server, "--model", "m") if server.mode != "wrong-models" else _cli_smoke(server)
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.returncode in (1, 69), (proc.returncode, proc.stderr[-2000:])
    for stream in (proc.stdout, proc.stderr):
        assert "\x1b" not in stream and "\u202e" not in stream
    if proc.returncode == 69:
        assert "error:" in proc.stderr


@pytest.mark.timeout(60)
@pytest.mark.parametrize("server", ["lone-surrogate"], indirect=True)
def test_lone_surrogates_in_answers_are_a_finding_not_a_crash(server: FakeSGLang) -> None:
    """JSON answers carrying "\\ud800" escapes (text long enough that the detectors encode it): the
    decoding layer replaces them, smoke ends with a failed verdict and names them as a finding."""
    proc = _cli_smoke(server, "--model", "m")
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "invalid_unicode" in proc.stdout + proc.stderr
    proc.stdout.encode("utf-8")
    as_json = _cli_smoke(server, "--model", "m", "--json")
    assert as_json.returncode == 1
    document = json.loads(as_json.stdout)
    found = [
        finding
        for result in document["results"]
        for finding in result["findings"]
        if finding["detector"] == "invalid_unicode"
    ]
    assert len(found) == len(document["results"])  # every answer carried two
    assert {finding["score"] for finding in found} == {2.0}
    assert all(finding["severity"] == "fail" for finding in found)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("server", ["escapes"], indirect=True)
def test_a_hostile_model_id_is_shown_escaped(server: FakeSGLang) -> None:
    """The model id from /v1/models goes into the title and the summary: shown escaped, markup inert."""
    proc = _cli_smoke(server)
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    assert "\x1b" not in proc.stdout + proc.stderr
    assert "\\x1b]0;pwned" in proc.stdout + proc.stderr
    assert ESCAPES.startswith("\x1b")
    json_proc = _cli_smoke(server, "--json")
    assert "\x1b" not in json_proc.stderr


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("server", "expected"),
    [
        ("slow-body", "DeadlineExceeded"),
        ("endless", "BodyTooLarge"),
        ("gzip-bomb", "BodyTooLarge"),
        ("wrong-models", "not a model list"),
        ("escapes", "not served"),
    ],
    indirect=["server"],
)
def test_readiness_probes_are_bounded_too(server: FakeSGLang, expected: str) -> None:
    """The deploy's readiness prober uses the same bounded client: a hostile server is 'not ready',
    with a reason that is safe to print, never a hang or a traceback."""
    from k26ctl.deploy.wait import HttpProber
    from k26ctl.profile import Profile
    from k26ctl.termsafe import is_clean

    profile = Profile.model_validate({"sglang": {"served_model_name": "fault-model"}})
    prober = HttpProber("127.0.0.1", server.server_address[1], profile, timeout=1.0)
    try:
        result = prober.probe()
    finally:
        prober.close()
    assert result.ok is False
    assert expected in result.detail, result.detail
    assert is_clean(result.detail)
