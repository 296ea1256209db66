"""Shell and systemd injection through every string field of a profile: refused, or rendered inert.
On the lab host, after deploys and remote validation with hostile values, no command ran that the
profile did not ask for, and the server received exactly the argv and environment it was given."""

from __future__ import annotations

import re
import typing
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel

from k26ctl.profile import Profile
from tests.support.cli import run_in_process
from tests.support.tiers import fast_run

from .helpers import LAB_PROFILES
from .scenario import Scenario

MARKER_DIR = "/root"


def payloads(tag: str) -> list[str]:
    """Hostile values; each would create /root/k26pwned-<tag>-N if anything ran it."""
    m = f"{MARKER_DIR}/k26pwned-{tag}"
    return [
        f"$(touch {m}-1)",
        f"`touch {m}-2`",
        f"x; touch {m}-3",
        f"x && touch {m}-4 #",
        f"x' ; touch {m}-5 ; echo '",
        f'x" ; touch {m}-6 ; echo "',
        "%n %h %i %% %",
        "${HOME} $HOME $$ $",
        "back\\slash \\",
        f"x\n[Service]\nExecStartPre=/bin/touch {m}-7",
        f"x\\\nExecStartPre=/bin/touch {m}-8",
        "semi;colon #hash",
    ]


def _string_fields(model: type[BaseModel], prefix: str = "") -> list[str]:
    fields: list[str] = []
    for name, field in model.model_fields.items():
        annotation = field.annotation
        args = typing.get_args(annotation)
        sub = next((c for c in (annotation, *args) if isinstance(c, type) and issubclass(c, BaseModel)), None)
        if sub is not None:
            fields += _string_fields(sub, f"{prefix}{name}.")
        elif annotation is str or (args and str in args and all(a in (str, type(None)) for a in args)):
            fields.append(f"{prefix}{name}")
    return fields


STRING_FIELDS = _string_fields(Profile)


def _directives(unit: str) -> list[tuple[str, str]]:
    """(section, key) of each setting, continuation lines joined: an independent, minimal reading."""
    out: list[tuple[str, str]] = []
    section = ""
    continued = False
    for line in unit.split("\n"):
        stripped = line.strip()
        if continued:
            continued = stripped.endswith("\\")
            continue
        if not stripped or stripped[0] in "#;":
            continue
        if stripped.startswith("[") and stripped.endswith("]"):
            section = stripped
            continue
        out.append((section, stripped.split("=", 1)[0]))
        continued = stripped.endswith("\\")
    return out


def _payloads_for(index: int) -> list[str]:
    """Every payload for every field; in a fast-tier run, every field still, each with a third of the
    payloads, rotating so that each payload is still tried on a third of the fields."""
    every = payloads("offline")
    return every[index % 3 :: 3] if fast_run() else every


def test_every_string_field_is_refused_or_inert() -> None:
    base = str(LAB_PROFILES / "none.yaml")
    clean = run_in_process(["render", base])
    assert clean.returncode == 0, clean.output
    assert len(STRING_FIELDS) > 15, STRING_FIELDS
    rendered = refused = 0
    for index, field in enumerate(STRING_FIELDS):
        # the same field holding a harmless value decides which directives the unit should have
        for benign in ("/opt/plain", "plain"):
            reference = run_in_process(["render", base, "--set", f"{field}={benign}"])
            if reference.returncode == 0:
                expected = sorted(_directives(reference.stdout))
                break
        else:
            expected = sorted(_directives(clean.stdout))
        for value in _payloads_for(index):
            run = run_in_process(["render", base, "--set", f"{field}={value}"])
            assert run.exception is None and "Traceback" not in run.output, (field, value, run.output)
            assert run.returncode in (0, 78), (field, value, run.output[-500:])
            if run.returncode == 78:
                refused += 1
                assert run.stderr.startswith("error:"), run.stderr
                continue
            rendered += 1
            assert sorted(_directives(run.stdout)) == expected, (field, value, run.stdout)
            assert "k26pwned" not in "".join(
                line for line in run.stdout.splitlines() if re.match(r"\s*Exec\w+Pre=", line)
            )
    assert rendered and refused  # both paths were exercised


@pytest.mark.labhost
@pytest.mark.timeout(180)
def test_hostile_values_reach_the_server_verbatim_and_run_nothing(scenario: Scenario, tmp_path: Path) -> None:
    m = f"{MARKER_DIR}/k26pwned-lab"
    name = f"$(touch {m}-1)`touch {m}-2`; touch {m}-3 %n %% ${{HOME}} $HOME \\ \" '"
    description = f"fault server; touch {m}-4 $(touch {m}-5) %n %h"
    env_value = f"$(touch {m}-6) `touch {m}-7` %h \\ \" ' ; $$ ${{PATH}}"
    extra = ["--tokenizer-path", f"/tmp/$(touch {m}-8) `x` %n $$ \\ \"q\" 'r'"]
    data = yaml.safe_load(scenario.profile.read_text())
    data["sglang"]["served_model_name"] = name
    data["sglang"]["extra_args"] = extra
    data["service"]["description"] = description
    data["service"]["environment"]["K26INJ"] = env_value
    hostile = tmp_path / "hostile.yaml"
    hostile.write_text(yaml.safe_dump(data, sort_keys=False))

    validated = run_in_process(["validate", str(hostile), "--remote"])
    assert "Traceback" not in validated.output and validated.exception is None
    assert validated.returncode in (0, 78), validated.output[-2000:]

    run = run_in_process(["deploy", str(hostile), "--yes", "--no-smoke"])
    assert run.exception is None and "Traceback" not in run.output
    assert run.returncode == 0, run.output[-3000:]

    from k26ctl.profile import load_profile
    from k26ctl.render import render_launch

    launch = render_launch(load_profile(hostile).profile)
    assert scenario.host.main_cmdline() == launch.argv  # exactly the argv asked for, word by word
    environ = scenario.host.main_environ()
    assert environ["K26INJ"] == env_value
    assert scenario.host.show("Description")["Description"] == description
    assert scenario.host.show("ExecStartPre").get("ExecStartPre", "") == ""

    # a path setting used in k26ctl's own remote commands (reads, writes, locks)
    check = run_in_process(
        ["deploy", str(hostile), "--check", "--set", f"service.unit_dir=/etc/systemd/system/$(touch {m}-9)"]
    )
    assert check.exception is None and "Traceback" not in check.output
    assert check.returncode in (1, 3, 69, 78), check.output[-2000:]

    found = scenario.host.console(
        f"ls -d {MARKER_DIR}/k26pwned-* /tmp/k26pwned-* 2>/dev/null || true"
    ).split()
    assert found == [], f"a hostile profile value ran a command on the host: {found}"
