"""Fixtures for the patch tests (helpers live in patch_support.py)."""

from __future__ import annotations

import pytest

from tests.patches.patch_support import RecordingHost, ReleaseSources


@pytest.fixture
def host() -> RecordingHost:
    return RecordingHost()


@pytest.fixture(scope="session")
def releases(tmp_path_factory: pytest.TempPathFactory) -> ReleaseSources:
    return ReleaseSources(tmp_path_factory.mktemp("sglang-releases"))
