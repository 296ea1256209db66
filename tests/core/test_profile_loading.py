"""Profile loading: extends chains, deep merge, cycles, unknown keys, --set coercion."""

from __future__ import annotations

from pathlib import Path

import pytest

from k26ctl.errors import ConfigError, ExitCode
from k26ctl.profile import SpecAlgorithm, deep_merge, get_dotted, load_profile

PROFILES = Path(__file__).resolve().parents[2] / "profiles"


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_deep_merge_merges_maps_and_replaces_the_rest() -> None:
    base = {"a": {"x": 1, "y": [1, 2]}, "b": 1}
    merged = deep_merge(base, {"a": {"y": [3]}, "c": 2})
    assert merged == {"a": {"x": 1, "y": [3]}, "b": 1, "c": 2}
    assert base == {"a": {"x": 1, "y": [1, 2]}, "b": 1}  # inputs untouched


def test_extends_chain_is_merged_child_last() -> None:
    loaded = load_profile(PROFILES / "ddtree-b16.yaml")
    p = loaded.profile
    assert [c.name for c in loaded.chain] == ["base.yaml", "dflash.yaml", "ddtree-b7.yaml", "ddtree-b16.yaml"]
    assert p.spec.algorithm is SpecAlgorithm("DDTREE")
    assert p.spec.ddtree.budget == 16  # from the child
    assert p.spec.ddtree.max_topk == 1  # from ddtree-b7
    assert p.spec.block_size == 8  # from dflash
    assert p.sglang.tp_size == 8  # from base
    assert p.service.environment == {"SGLANG_ENABLE_JIT_DEEPGEMM": "0"}


def test_extends_is_relative_to_the_file(tmp_path: Path) -> None:
    sub = tmp_path / "sub"
    sub.mkdir()
    write(tmp_path, "parent.yaml", "sglang:\n  port: 31000\n")
    child = write(sub, "child.yaml", "extends: ../parent.yaml\nsglang:\n  tp_size: 4\n")
    p = load_profile(child).profile
    assert (p.sglang.port, p.sglang.tp_size) == (31000, 4)


def test_extends_cycle_is_rejected(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", "extends: b.yaml\n")
    write(tmp_path, "b.yaml", "extends: c.yaml\n")
    write(tmp_path, "c.yaml", "extends: a.yaml\n")
    with pytest.raises(ConfigError) as err:
        load_profile(tmp_path / "a.yaml")
    assert "cycle" in err.value.message and "a.yaml -> b.yaml -> c.yaml -> a.yaml" in err.value.message
    assert err.value.exit_code == ExitCode.CONFIG


def test_self_extends_is_a_cycle(tmp_path: Path) -> None:
    path = write(tmp_path, "a.yaml", "extends: a.yaml\n")
    with pytest.raises(ConfigError, match="cycle"):
        load_profile(path)


def test_missing_parent_names_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "a.yaml", "extends: nothere.yaml\n")
    with pytest.raises(ConfigError, match=r"nothere\.yaml"):
        load_profile(path)


def test_unknown_yaml_key_gets_path_and_did_you_mean(tmp_path: Path) -> None:
    path = write(tmp_path, "a.yaml", "spec:\n  ddtree:\n    budgt: 3\n")
    with pytest.raises(ConfigError) as err:
        load_profile(path)
    assert "spec.ddtree.budgt" in err.value.message and str(path) in err.value.message
    assert err.value.hint == "did you mean 'spec.ddtree.budget'?"


def test_unknown_key_in_a_parent_is_reported(tmp_path: Path) -> None:
    write(tmp_path, "parent.yaml", "sglang:\n  tp_szie: 8\n")
    child = write(tmp_path, "child.yaml", "extends: parent.yaml\n")
    with pytest.raises(ConfigError) as err:
        load_profile(child)
    assert "sglang.tp_szie" in err.value.message and "tp_size" in (err.value.hint or "")


def test_invalid_yaml_reports_line(tmp_path: Path) -> None:
    path = write(tmp_path, "a.yaml", "sglang:\n  port: [1,\n")
    with pytest.raises(ConfigError) as err:
        load_profile(path)
    assert f"{path}:" in err.value.message


def test_wrong_type_names_the_key(tmp_path: Path) -> None:
    path = write(tmp_path, "a.yaml", "sglang:\n  port: lots\n")
    with pytest.raises(ConfigError, match=r"sglang\.port"):
        load_profile(path)


@pytest.mark.parametrize(
    ("override", "key", "expected"),
    [
        ("spec.ddtree.budget=7", "spec.ddtree.budget", 7),
        ("sglang.mem_fraction_static=0.8", "sglang.mem_fraction_static", 0.8),
        ("sglang.trust_remote_code=false", "sglang.trust_remote_code", False),
        ("spec.algorithm=DFLASH", "spec.algorithm", "DFLASH"),
        ("patches=[]", "patches", []),
        ("patches=[triton-ddtree-verify-width]", "patches", ["triton-ddtree-verify-width"]),
        ("service.environment={A: '1', B: x y}", "service.environment", {"A": "1", "B": "x y"}),
        ("sglang.extra_args=[--foo, '1']", "sglang.extra_args", ["--foo", "1"]),
        # a string field keeps YAML-looking text literally
        ("sglang.served_model_name=on", "sglang.served_model_name", "on"),
        ("sglang.served_model_name=123", "sglang.served_model_name", "123"),
        ("service.environment.NEW=1", "service.environment.NEW", "1"),
    ],
)
def test_set_coerces_to_the_field_type(override: str, key: str, expected: object) -> None:
    p = load_profile(PROFILES / "ddtree-b16.yaml", [override]).profile
    assert get_dotted(p, key) == expected


def test_set_is_applied_in_order_and_last_wins() -> None:
    p = load_profile(PROFILES / "base.yaml", ["sglang.port=1234", "sglang.port=4321"]).profile
    assert p.sglang.port == 4321


def test_set_unknown_key_gets_did_you_mean() -> None:
    with pytest.raises(ConfigError) as err:
        load_profile(PROFILES / "base.yaml", ["spec.ddtree.budgte=3"])
    assert err.value.hint == "did you mean 'spec.ddtree.budget'?"


@pytest.mark.parametrize("bad", ["nokey", "=3", "a..b=1"])
def test_set_malformed_is_a_config_error(bad: str) -> None:
    with pytest.raises(ConfigError):
        load_profile(PROFILES / "base.yaml", [bad])


def test_set_value_of_wrong_type_is_rejected() -> None:
    with pytest.raises(ConfigError, match=r"spec\.ddtree\.budget"):
        load_profile(PROFILES / "base.yaml", ["spec.ddtree.budget=seven"])


def test_values_with_newlines_or_control_chars_are_rejected() -> None:
    with pytest.raises(ConfigError):
        load_profile(PROFILES / "base.yaml", ['sglang.served_model_name="a\\nb"'])
    with pytest.raises(ConfigError):
        load_profile(PROFILES / "base.yaml", ['sglang.extra_args=["a\\x01b"]'])


def test_shipped_profile_found_by_name() -> None:
    assert load_profile("ddtree-b7").profile.spec.ddtree.budget == 7


def test_profile_name_defaults_to_file_stem(tmp_path: Path) -> None:
    path = write(tmp_path, "mine.yaml", "sglang:\n  port: 30001\n")
    assert load_profile(path).profile.name == "mine"


@pytest.mark.parametrize("name", ["base", "dflash", "ddtree-b7", "ddtree-b16", "ddtree-b16-patched"])
def test_every_shipped_profile_loads(name: str) -> None:
    p = load_profile(PROFILES / f"{name}.yaml").profile
    assert p.host.address == "k26-host"  # production profiles name hosts by SSH alias
    assert p.sglang.tp_size == 8 and p.sglang.attention_backend == "triton"
