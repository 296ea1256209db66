"""Every /server_info and meta_info field k26ctl reads exists in real SGLang (0.5.15 and 0.5.23)."""

from __future__ import annotations

import pytest

from k26ctl.smoke import client
from k26ctl.smoke.responses import MetaInfo
from k26ctl.validate import load_catalog
from tests.conformance.sources import Sources

pytestmark = pytest.mark.network_sglang

BRANCH_ONLY = {"speculative_ddtree_budget"}  # the DDTree branch's own flag, in no release


def test_server_info_keys(sources: Sources) -> None:
    http = sources.text("srt/entrypoints/http_server.py")
    assert '"internal_states": internal_states' in http
    assert '@app.get("/server_info")' in http
    assert sources.files_containing('"avg_spec_accept_length"'), "avg_spec_accept_length is never set"


def test_identity_keys_are_server_args(sources: Sources) -> None:
    """/server_info carries the server args by their dests: k26ctl's identity keys must be among them."""
    dests = {record["dest"] for record in load_catalog().tables[sources.version].values()}
    missing = set(client._IDENTITY_KEYS) - dests - BRANCH_ONLY
    assert not missing, missing


def test_meta_info_fields(sources: Sources) -> None:
    manager = sources.text("srt/managers/tokenizer_manager.py")
    for field in MetaInfo.model_fields:
        written = f'meta_info["{field}"]' in manager or f'"{field}":' in manager
        assert written, f"meta_info.{field} is not written by {sources.version}'s tokenizer manager"
