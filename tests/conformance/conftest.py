"""Fixtures of the conformance tests: real SGLang release sources (skipped without the package index),
SGLang's protocol models per release, and the lab server as the lab profiles run it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.conformance.sources import VERSIONS, Sources, load_protocol, release_sources


@pytest.fixture(scope="session", params=VERSIONS)
def sources(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Sources:
    return release_sources(str(request.param), tmp_path_factory.getbasetemp() / "sglang-sources")


@pytest.fixture(scope="session")
def protocol(sources: Sources) -> Any:
    pytest.importorskip("openai", reason="SGLang's protocol module imports openai's types (test extra)")
    pytest.importorskip("msgspec", reason="SGLang 0.5.23's protocol module imports msgspec (test extra)")
    return load_protocol(sources)


@pytest.fixture(scope="session")
def lab_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The lab server as k26ctl's lab profiles run it: DDTree budget 7, the kimi_k2 reasoning parser."""
    pytest.importorskip("torch", reason="the lab server needs torch (lab extra)")
    from tests.support.lab_server import start_lab_server

    server = start_lab_server(
        tmp_path_factory.mktemp("conformance-lab"),
        [
            "--served-model-name",
            "k26lab-tiny",
            "--reasoning-parser",
            "kimi_k2",
            "--speculative-algorithm",
            "DDTREE",
            "--speculative-dflash-block-size",
            "8",
            "--speculative-ddtree-budget",
            "7",
            "--enable-metrics",
        ],
    )
    yield server
    server.stop()
