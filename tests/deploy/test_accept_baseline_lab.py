"""A deploy of a known configuration after its drafter got weaker (same files and flags, the stand-in's
n-gram drafter cut to a shorter context): the warning names both accept lengths; with the user's
failure ratio the same drop fails the deploy; `smoke PROFILE` and `status` show the baseline beside the
value. Real lab host, real deploys."""

from __future__ import annotations

from typing import Any

from tests.support.cli import k26_json, run_k26ctl

from .labdeploy import LAB_PROFILES, lab_connection, lab_sets

PROFILE = str(LAB_PROFILES / "ddtree-b7.yaml")
NO_FLOOR = "smoke.min_accept_length=null"
WEAKER = "service.environment.K26LAB_DRAFT_ORDER=5"


def test_a_weaker_drafter_under_a_known_key_warns_with_both_numbers_then_fails_below_the_ratio(
    lab_host: Any,
) -> None:
    from k26ctl.deploy.accept_baseline import baselines_path

    with lab_connection(PROFILE, lab_host) as (host, _systemd, profile):
        host.run(["rm", "-f", baselines_path(profile.service.name)], sudo=True, check=True)
    code, first = k26_json("deploy", PROFILE, *lab_sets(lab_host, NO_FLOOR), "--yes", "--smoke")
    assert code == 0, first["message"]
    assert first["accept_baseline"]["status"] == "no-baseline"
    recorded = first["accept_baseline"]["accept_length"]

    code, weak = k26_json("deploy", PROFILE, *lab_sets(lab_host, NO_FLOOR, WEAKER), "--yes", "--smoke")
    found = weak["accept_baseline"]
    assert found["status"] == "warning", found
    assert found["baseline"] == recorded and found["accept_length"] < 0.95 * recorded
    assert f"{found['accept_length']:.2f}" in found["message"] and f"{recorded:.2f}" in found["message"]
    step = next(s for s in weak["steps"] if s["name"] == "accept-baseline")
    assert step["detail"].startswith("warning: accept length")

    strict = lab_sets(lab_host, NO_FLOOR, WEAKER, "smoke.accept_fail_ratio=0.95")
    code, failed = k26_json("deploy", PROFILE, *strict, "--yes", "--smoke")
    assert code == 1 and failed["accept_baseline"]["status"] == "failed"
    assert failed["accept_baseline"]["baseline"] == recorded  # the warned run did not move it

    code, smoked = k26_json("smoke", PROFILE, *lab_sets(lab_host, NO_FLOOR, WEAKER))
    assert smoked["accept_baseline"]["baseline"] == recorded, smoked["accept_baseline"]
    assert f"(baseline {recorded:.2f})" in smoked["summary"]

    shown = run_k26ctl("status", PROFILE, *lab_sets(lab_host), timeout=120)
    assert f"(baseline {recorded:.2f} BELOW)" in shown.stdout
