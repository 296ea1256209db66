"""validate names SGLang's lossy-by-design settings: relaxed accept thresholds and a simulated accept
length, a warning by default and an error under `smoke.lossless: strict`."""

from __future__ import annotations

from pathlib import Path

from k26ctl.lossy_levers import EVERY_TEMPERATURE, SAMPLED_ONLY, levers
from k26ctl.profile import load_profile
from k26ctl.validate import ValidationReport, validate_profile

PROFILES = Path(__file__).resolve().parents[2] / "profiles"


def report(name: str, *overrides: str) -> ValidationReport:
    profile = load_profile(PROFILES / f"{name}.yaml", list(overrides)).profile
    return validate_profile(profile, strict=False, systemd=False)


def codes(rep: ValidationReport, level: str) -> list[str]:
    return [f.code for f in rep.findings if f.level == level]


def test_relaxed_thresholds_warn_and_name_the_temperatures() -> None:
    rep = report("lab/ddtree-b7-relaxed")
    found = [f for f in rep.findings if f.code == "lossless/relaxed-threshold"]
    assert rep.valid and [f.level for f in found] == ["warning", "warning"]
    text = " ".join(f.message for f in found)
    assert "--speculative-accept-threshold-single 0.3" in text
    assert "--speculative-accept-threshold-acc 0.1" in text
    assert "every temperature above 0" in text and "temperature 0" in text


def test_strict_makes_them_errors() -> None:
    rep = report("lab/ddtree-b7-relaxed", "smoke.lossless=strict")
    assert not rep.valid
    assert codes(rep, "error").count("lossless/relaxed-threshold") == 2


def test_simulated_accept_length_from_the_environment() -> None:
    rep = report("dflash", "service.environment.SGLANG_SIMULATE_ACC_LEN='3.5'")
    (found,) = [f for f in rep.findings if f.code == "lossless/simulated-accept"]
    assert found.level == "warning" and "0 included" in found.message
    strict = report("dflash", "service.environment.SGLANG_SIMULATE_ACC_LEN='3.5'", "smoke.lossless=strict")
    assert "lossless/simulated-accept" in codes(strict, "error")


def test_lossless_values_stay_quiet() -> None:
    rep = report(
        "dflash",
        "sglang.extra_args=['--speculative-accept-threshold-single', '1.0']",
        "service.environment.SGLANG_SIMULATE_ACC_LEN='-1'",
    )
    assert not [f for f in rep.findings if f.code.startswith("lossless/")]
    assert not [f for f in report("lab/ddtree-b7").findings if f.code.startswith("lossless/")]


def test_levers_from_served_settings() -> None:
    found = levers(
        {"speculative_accept_threshold_single": 1.0, "speculative_accept_threshold_acc": 0.5},
        {"SGLANG_SIMULATE_ACC_LEN": "2"},
    )
    assert [(lv.name, lv.value, lv.temperatures) for lv in found] == [
        ("--speculative-accept-threshold-acc", 0.5, SAMPLED_ONLY),
        ("SGLANG_SIMULATE_ACC_LEN", 2.0, EVERY_TEMPERATURE),
    ]
    assert levers({"speculative_accept_threshold_single": "junk"}) == []
