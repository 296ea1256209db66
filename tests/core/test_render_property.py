"""Property: for any profile values, rendering either refuses with ConfigError or yields a unit whose
ExecStart= (read back by systemd's rules) is exactly the intended argv and whose Environment= lines are
exactly the intended environment. Validation never crashes either."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from k26ctl.errors import ConfigError
from k26ctl.profile import profile_from_data
from k26ctl.render import render_launch, render_unit
from k26ctl.unitfile import environment_from_unit, exec_start_argv, unit_settings
from k26ctl.validate import validate_profile
from tests.support.tiers import examples

# Printable text weighted towards the characters systemd treats specially, so most examples get as far
# as the unit; `poisoned` (below) puts a control character into one field of some examples.
printable = st.text(st.characters(exclude_categories=["Cs", "Cc", "Zl", "Zp"]), max_size=24)
special = st.text(st.sampled_from(list(" %$\\\"';#=-@{}~\u00e9\u2713\u6a21abc/")), max_size=16)
anything = st.text(st.characters(exclude_categories=["Cs"]), max_size=24)
control = st.builds(
    lambda a, c, b: a + c + b,
    printable,
    st.sampled_from(list("\n\r\t\x00\x1b\x7f\x85\u2028\u2029")),
    printable,
)
text = st.one_of(special, printable)
good_env_name = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True)
env_name = st.one_of(good_env_name, good_env_name, good_env_name, text)
maybe = st.one_of(st.none(), st.none(), text)


def rarely(common: st.SearchStrategy[Any], rare: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """`rare` in about one example in eight (plain one_of would pick it far more often)."""
    return st.integers(0, 7).flatmap(lambda k: rare if k == 0 else common)


path = rarely(st.one_of(st.none(), text.map(lambda s: "/srv/" + s.replace("/", "-"))), text)

SERVICE_KEYS = {
    "Type",
    "User",
    "Group",
    "WorkingDirectory",
    "Environment",
    "CacheDirectory",
    "EnvironmentFile",
    "ExecStart",
    "Restart",
    "RestartSec",
    "TimeoutStartSec",
    "TimeoutStopSec",
    "KillMode",
    "KillSignal",
    "LimitNOFILE",
    "LimitMEMLOCK",
    "SyslogIdentifier",
    "NoNewPrivileges",
    "PrivateTmp",
    "ProtectSystem",
    "ProtectControlGroups",
    "RestrictSUIDSGID",
    "RestrictRealtime",
    "LockPersonality",
}


@st.composite
def profile_data(draw: st.DrawFn) -> dict[str, Any]:
    data: dict[str, Any] = {
        "sglang": {
            "python": draw(
                rarely(st.just("/opt/sglang/venv/bin/python"), text.map(lambda s: f"/opt/{s}/py"))
            ),
            "entrypoint": draw(st.one_of(st.just("sglang.launch_server"), text)),
            "model_path": draw(text),
            "served_model_name": draw(maybe),
            "host": draw(text),
            "tool_call_parser": draw(maybe),
            "attention_backend": draw(st.one_of(st.just("triton"), maybe)),
            "api_key_env": draw(st.one_of(st.none(), good_env_name)),
            "extra_args": draw(st.lists(text, max_size=6)),
            "mem_fraction_static": draw(st.one_of(st.none(), st.floats(0.01, 1.0))),
            "port": draw(st.integers(1, 65535)),
        },
        "service": {
            "description": draw(text),
            "syslog_identifier": draw(maybe),
            "environment": draw(
                rarely(
                    st.dictionaries(good_env_name, text, max_size=4),
                    st.dictionaries(env_name, text, max_size=2),
                )
            ),
            "environment_file": draw(path),
            "working_directory": draw(path),
            "user": draw(rarely(st.sampled_from([None, "sglang", "root", "gpu-user"]), text)),
            "path": draw(text),
            "cuda_home": draw(maybe),
        },
        "spec": draw(
            st.fixed_dictionaries(
                {
                    "algorithm": st.sampled_from(["NONE", "DFLASH", "DDTREE", "EAGLE3"]),
                    "draft_model_path": maybe,
                    "block_size": st.one_of(st.none(), st.integers(-2, 40)),
                    "ddtree": st.fixed_dictionaries(
                        {
                            "budget": st.one_of(st.none(), st.integers(-2, 40)),
                            "max_topk": st.one_of(st.none(), st.integers(-1, 8)),
                        }
                    ),
                }
            )
        ),
        "patches": draw(st.lists(text, max_size=2)),
    }
    if draw(st.integers(0, 4)) == 0:
        section, key = draw(st.sampled_from(POISONABLE))
        data[section][key] = draw(st.one_of(control, anything))
    return data


POISONABLE = [
    ("sglang", "python"),
    ("sglang", "model_path"),
    ("sglang", "host"),
    ("service", "description"),
    ("service", "syslog_identifier"),
    ("service", "environment_file"),
    ("service", "path"),
]


@settings(max_examples=examples(300))
@given(profile_data())
def test_render_gives_exact_argv_or_a_clean_error(data: dict[str, Any]) -> None:
    try:
        profile = profile_from_data(data)
    except ConfigError:
        return
    try:
        spec = render_launch(profile)
        unit = render_unit(profile)
    except ConfigError:
        return
    secret = "value with ${X} $$ and spaces"
    env = {name: secret for name in spec.env_refs.values()}
    expected = [secret if i in spec.env_refs else w for i, w in enumerate(spec.argv)]
    assert exec_start_argv(unit, env) == expected
    assert environment_from_unit(unit) == spec.env
    found = unit_settings(unit)
    assert [k for s, k, _ in found if s == "Service" and k == "ExecStart"] == ["ExecStart"]
    assert {k for s, k, _ in found if s == "Service"} <= SERVICE_KEYS
    assert {s for s, _, _ in found} == {"Unit", "Service", "Install"}


@settings(max_examples=examples(150))
@given(profile_data())
def test_validation_never_crashes(data: dict[str, Any]) -> None:
    try:
        profile = profile_from_data(data)
    except ConfigError:
        return
    report = validate_profile(profile, systemd=False)
    assert report.valid == (not any(f.level == "error" for f in report.findings))
    try:
        render_unit(profile)
    except ConfigError:
        assert not report.valid and "render/invalid" in report.codes()
