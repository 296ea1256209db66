"""A server that answers badly (hangs, 500s, broken or binary bodies, multi-megabyte texts): the smoke
suite ends with a verdict or a clean unreachable error, in bounded time, and its report can be
printed and serialised whatever the text held."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import pytest

from k26ctl.errors import UnreachableError
from tests.support.cli import run_k26ctl
from tests.support.fake_sglang import FakeSGLang, start_in_thread

from .helpers import REPO


@pytest.fixture()
def server(request: pytest.FixtureRequest) -> Iterator[FakeSGLang]:
    srv = start_in_thread(request.param)
    yield srv
    srv.hung.set()  # release handlers stuck in `hang`
    srv.shutdown()
    srv.server_close()


def _url(srv: FakeSGLang) -> str:
    return f"http://127.0.0.1:{srv.server_address[1]}"


def _smoke(srv: FakeSGLang, timeout: float = 3.0) -> object:
    from k26ctl.smoke import SmokeOptions, SmokeTarget, run_smoke

    return run_smoke(SmokeTarget(_url(srv), "fault-model"), options=SmokeOptions(timeout=timeout))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("server", ["status500", "malformed", "binary", "huge", "binary-text"], indirect=True)
def test_bad_bodies_fail_the_smoke_with_findings(server: FakeSGLang) -> None:
    report = _smoke(server)
    assert report.passed is False  # type: ignore[attr-defined]
    assert server.completions > 0, "the suite never reached the completion endpoint"
    document = report.to_json()  # type: ignore[attr-defined]
    json.dumps(document)
    text = report.summary()  # type: ignore[attr-defined]
    text.encode("utf-8")  # printable on a UTF-8 terminal: no lone surrogates in the summary


@pytest.mark.timeout(60)
@pytest.mark.parametrize("server", ["hang"], indirect=True)
def test_hanging_server_is_unreachable_not_a_hang(server: FakeSGLang) -> None:
    with pytest.raises(UnreachableError) as caught:
        _smoke(server, timeout=2.0)
    assert "timeout" in caught.value.message.lower() or "no answer" in caught.value.message.lower()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("server", ["hang", "binary-text", "malformed"], indirect=True)
def test_smoke_cli_against_a_hostile_server(server: FakeSGLang) -> None:
    """Through the real console entry, as a subprocess: a documented exit code and no traceback."""
    proc = run_k26ctl("smoke", "--url", _url(server), "--model", "fault-model", "--timeout", "2", timeout=50)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode in (1, 69), (proc.returncode, proc.stderr[-2000:])
    if proc.returncode == 69:
        assert "error:" in proc.stderr


@pytest.mark.timeout(120)
@pytest.mark.parametrize("server", ["huge-text"], indirect=True)
def test_multi_megabyte_completion_texts_are_scored_in_bounded_time(server: FakeSGLang) -> None:
    """A server that ignores max_tokens and sends 4 MiB per answer: the default suite must still end in
    well under its per-request timeout. Run in a child with a 60 s budget (it takes about 4 s on an idle
    2-core machine, several times that when the machine is loaded) so a slow scorer cannot stall the
    test session."""
    code = (
        "import sys; from k26ctl.smoke import run_smoke, SmokeTarget, SmokeOptions;"
        f"r = run_smoke(SmokeTarget({_url(server)!r}, 'fault-model'), options=SmokeOptions(timeout=30));"
        "print(r.passed)"
    )
    try:
        proc = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO
        )
    except subprocess.TimeoutExpired:
        raise AssertionError(
            "the default smoke suite did not finish within 60 s against 4 MiB answers"
        ) from None
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "False"
