"""The algorithm catalogue against SGLang's option tables, and its readers (render, validate, smoke's
accept rule) reading the same row."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from k26ctl.algorithms import ALGORITHMS, BY_NAME, DRAFT_TOKENS, Algorithm, algorithm
from k26ctl.profile import SpecAlgorithm, load_profile
from k26ctl.render import render_launch
from k26ctl.smoke.acceptance import longest_accept, rule_for
from k26ctl.validate import validate_profile
from k26ctl.validate.releases import OPTION_TABLE, ReleaseCatalog, build_catalog

PROFILES = Path(__file__).resolve().parents[2] / "profiles"


def named_by_tables(catalog: ReleaseCatalog) -> dict[str, list[str]]:
    """Every `--speculative-algorithm` name a table offers (the release's enum, any choices the flag
    lists, the DDTree branch), with the releases that name it."""
    named: dict[str, list[str]] = {}
    for release in catalog.releases:
        names = set(catalog.algorithms_for(release)) | set(catalog.branch_algorithms)
        for record in catalog.tables[release].values():
            if "--speculative-algorithm" in record["flags"]:
                names |= set(record.get("choices") or ())
        for name in names:
            named.setdefault(name.upper(), []).append(release)
    return named


def missing_rows(catalog: ReleaseCatalog) -> list[str]:
    return sorted(name for name in named_by_tables(catalog) if name not in BY_NAME)


def raw_table() -> dict:
    return json.loads(OPTION_TABLE.read_text())


def test_every_algorithm_a_release_table_names_has_a_row() -> None:
    missing = missing_rows(build_catalog(raw_table()))
    assert missing == [], f"add a row to k26ctl/algorithms.py for {missing} (see ARCHITECTURE.md)"


def test_a_new_name_in_a_release_table_is_caught() -> None:
    raw = copy.deepcopy(raw_table())
    raw["deltas"][-1]["algorithms_added"].append("NEWSPEC")
    assert missing_rows(build_catalog(raw)) == ["NEWSPEC"]
    raw = copy.deepcopy(raw_table())
    spec_flag = next(o for o in raw["base"]["options"] if o["flags"] == ["--speculative-algorithm"])
    spec_flag["choices"] = ["EAGLE", "LATER"]
    assert missing_rows(build_catalog(raw)) == ["LATER"]


@pytest.mark.parametrize("row", [a for a in ALGORITHMS if a.since is not None], ids=lambda a: a.name)
def test_since_is_the_first_release_whose_table_has_it(row: Algorithm) -> None:
    catalog = build_catalog(raw_table())
    assert catalog.releases_with_algorithm(row.name)[0] == row.since


def test_rows_without_a_release_are_aliases_branches_or_none() -> None:
    catalog = build_catalog(raw_table())
    for row in ALGORITHMS:
        if row.since is None and row.name != "NONE":
            assert row.alias_of in BY_NAME or row.name in catalog.branch_algorithms, row.name


def test_the_profile_enum_is_the_catalogue() -> None:
    assert [a.value for a in SpecAlgorithm] == [a.name for a in ALGORITHMS]


@pytest.mark.parametrize("row", [a for a in ALGORITHMS if a.speculative], ids=lambda a: a.name)
def test_render_writes_the_block_flag_the_row_names(row: Algorithm) -> None:
    loaded = load_profile(PROFILES / "ddtree-b7.yaml", [f"spec.algorithm={row.name}"])
    argv = render_launch(loaded.profile).argv
    flag = row.block_flag or DRAFT_TOKENS
    assert argv[argv.index(flag) + 1] == "8"
    assert ("--speculative-ddtree-budget" in argv) == ("--speculative-ddtree-budget" in row.reads)


@pytest.mark.parametrize(
    ("name", "args", "longest", "meant"),
    [
        ("FROZEN_KV_MTP", {"speculative_num_steps": 3}, 4.0, True),
        ("DSPARK", {"speculative_num_draft_tokens": 5}, 5.0, True),
        ("UNO", {"speculative_num_draft_tokens": 6}, None, True),
        ("NGRAM", {"speculative_num_draft_tokens": 8}, None, False),
        ("NOT_CATALOGUED", {"speculative_num_draft_tokens": 8}, None, False),
    ],
)
def test_accept_rule_reads_the_row(name: str, args: dict, longest: float | None, meant: bool) -> None:
    info = {"speculative_algorithm": name, **args}
    assert longest_accept(info) == longest
    assert rule_for(info).meant_to_accept is meant


def test_validate_asks_the_row_for_a_draft_model() -> None:
    for row in ALGORITHMS:
        if not row.speculative:
            continue
        loaded = load_profile(
            PROFILES / "ddtree-b7.yaml",
            [f"spec.algorithm={row.name}", "spec.draft_model_path=null", "sglang.version=0.5.23"],
        )
        codes = validate_profile(loaded.profile, systemd=False).codes()
        assert ("spec/draft-model-required" in codes) is row.needs_draft_model, row.name


def test_lookup_is_case_blind() -> None:
    assert algorithm("ddtree") is BY_NAME["DDTREE"] and algorithm(None) is BY_NAME["NONE"]
    assert algorithm("nope") is None
