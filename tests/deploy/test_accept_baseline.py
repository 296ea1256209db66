"""Accept-length baselines per configuration: the key, the 95 % warning with both numbers, the user's
failure ratio, a new key, the upgrade that leaves acceptance at 1, and a damaged file."""

from __future__ import annotations

from pathlib import Path

import pytest

from k26ctl.deploy import accept_baseline as ab
from k26ctl.errors import ExitCode, K26Error
from k26ctl.profile import Profile, load_profile

PROFILES = Path(__file__).resolve().parents[2] / "profiles"


def profile(*overrides: str) -> Profile:
    return load_profile(PROFILES / "lab" / "ddtree-b7.yaml", list(overrides)).profile


def with_samples(key: dict, *values: float) -> ab.BaselineFile:
    data = ab.BaselineFile()
    for value in values:
        data.add(key, ab.sample_of(value, 40.0, "deploy smoke"))
    return data


def test_the_key_is_model_drafter_release_and_speculative_flags_not_the_environment() -> None:
    key = ab.config_key(profile(), "0.5.15")
    assert key["model"].endswith("k26lab-tiny") and key["drafter"].endswith("k26lab-tiny-dflash")
    assert key["sglang"] == "0.5.15" and key["speculative"]["ddtree"]["budget"] == 7
    weaker_in_place = ab.config_key(profile("service.environment.K26LAB_DRAFT_ORDER=1"), "0.5.15")
    assert ab.key_id(weaker_in_place) == ab.key_id(key)  # same files, same flags: same configuration
    for other in (
        ab.config_key(profile("spec.ddtree.budget=3"), "0.5.15"),
        ab.config_key(profile("spec.draft_model_path=/opt/other-drafter"), "0.5.15"),
        ab.config_key(profile(), "0.5.23"),
    ):
        assert ab.key_id(other) != ab.key_id(key)


def test_a_new_key_has_no_baseline_yet_and_is_recorded() -> None:
    key = ab.config_key(profile(), "0.5.15")
    found = ab.compare(ab.BaselineFile(), key, 3.2, 41.0)
    assert found.status == "no-baseline" and "no baseline yet" in found.message
    assert ab.records_baseline(found) and found.to_json()["baseline"] is None


def test_below_95_percent_warns_with_both_numbers_and_does_not_move_the_baseline() -> None:
    key = ab.config_key(profile(), "0.5.15")
    data = with_samples(key, 3.40, 3.50, 3.45)
    ok = ab.compare(data, key, 3.30, 40.0)
    assert ok.status == "ok" and ok.baseline == pytest.approx(3.45)
    weak = ab.compare(data, key, 2.10, 30.0)
    assert weak.status == "warning" and "2.10" in weak.message and "3.45" in weak.message
    assert "30.0 tok/s" in weak.message and "40.0 tok/s" in weak.message
    assert weak.to_json()["ratio"] == pytest.approx(2.10 / 3.45, abs=1e-4)
    assert not ab.records_baseline(weak)


def test_below_the_user_ratio_fails() -> None:
    key = ab.config_key(profile(), "0.5.15")
    data = with_samples(key, 3.4)
    assert ab.compare(data, key, 2.5, None, fail_ratio=0.8).status == "failed"
    assert ab.compare(data, key, 3.0, None, fail_ratio=0.8).status == "warning"


def test_accept_length_one_after_an_upgrade_names_the_earlier_release() -> None:
    old = ab.config_key(profile(), "0.5.15")
    data = with_samples(old, 3.4)
    new = ab.config_key(profile(), "0.5.23")
    found = ab.compare(data, new, 1.0, 20.0)
    assert found.status == "failed" and "0.5.15" in found.message and "#24795" in found.message
    assert ab.compare(data, new, 3.3, 40.0).status == "no-baseline"


def test_samples_are_bounded_and_the_file_round_trips() -> None:
    key = ab.config_key(profile(), "0.5.15")
    data = with_samples(key, *[3.0 + i / 100 for i in range(20)])
    entry = data.entry(key)
    assert entry is not None and len(entry.samples) == ab.MAX_SAMPLES
    again = ab.parse_baselines(data.to_text().encode(), "host:/var/lib/k26ctl/x/accept-baselines.json").entry(
        key
    )
    assert again is not None and again.accept_length == entry.accept_length


@pytest.mark.parametrize(
    "raw",
    [
        b"{not json",
        b'{"format": "k26ctl-accept-baselines/9", "entries": {}}',
        b'{"entries": {"a": {"key": 3}}}',
    ],
)
def test_a_damaged_file_is_one_line_exit_78(raw: bytes) -> None:
    with pytest.raises(K26Error) as info:
        ab.parse_baselines(raw, "k26lab:/var/lib/k26ctl/s/accept-baselines.json")
    assert info.value.exit_code == ExitCode.CONFIG and "\n" not in info.value.message
