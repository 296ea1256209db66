"""How one step turns a deploy and a judge into a verdict (the deployer is a stand-in here; the lab
tests run the real one)."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from pydantic import ValidationError

from k26ctl.bisect.plan import Probe
from k26ctl.bisect.steps import CommandJudge, DeployingStepRunner
from k26ctl.deploy.model import DeployResult
from k26ctl.profile import LoadedProfile, load_profile
from k26ctl.resources import profiles_dir
from k26ctl.search.step import Deployed, deployed_from_result
from k26ctl.search.verdict import Verdict
from k26ctl.smoke.finding import Finding
from k26ctl.smoke.report import SmokeReport

KEY = "spec.ddtree.budget"


@dataclass
class ScriptedDeployer:
    deployed: Deployed
    smokes: list[Verdict] = field(default_factory=list)
    deploys: int = 0
    smoke_calls: int = 0

    def deploy(self, loaded: LoadedProfile) -> Deployed:
        self.deploys += 1
        assert loaded.profile.spec.ddtree.budget == 9
        return self.deployed

    def smoke(self, loaded: LoadedProfile) -> tuple[Verdict, str]:
        self.smoke_calls += 1
        return self.smokes.pop(0), "smoke again"

    @contextlib.contextmanager
    def server_url(self, loaded: LoadedProfile) -> Iterator[str | None]:
        yield "http://127.0.0.1:30000"


def base() -> LoadedProfile:
    return load_profile(profiles_dir() / "ddtree-b16.yaml")


PROBE = Probe({KEY: 9}, "search", "", 1)


def test_a_service_that_does_not_come_up_is_a_skip_or_with_the_flag_bad() -> None:
    down = Deployed(up=False, restarted=True, detail="exited during load")
    skip = DeployingStepRunner(base(), ScriptedDeployer(down), None).run(PROBE, 1)
    assert skip.verdict is Verdict.SKIP and skip.restarted and "did not come up" in skip.detail
    bad = DeployingStepRunner(base(), ScriptedDeployer(down), None, load_failure_is_bad=True).run(PROBE, 1)
    assert bad.verdict is Verdict.BAD


def test_a_refused_value_is_a_skip_even_with_load_failure_is_bad() -> None:
    refused = Deployed(up=False, restarted=False, detail="refused: invalid", refused=True)
    out = DeployingStepRunner(base(), ScriptedDeployer(refused), None, load_failure_is_bad=True).run(PROBE, 1)
    assert out.verdict is Verdict.SKIP and not out.restarted


def test_the_deploys_smoke_is_the_first_try_and_more_tries_smoke_again_without_redeploying() -> None:
    deployer = ScriptedDeployer(Deployed(True, True, "ok", Verdict.GOOD), [Verdict.GOOD, Verdict.BAD])
    out = DeployingStepRunner(base(), deployer, None, tries=4).run(PROBE, 1)
    assert out.verdict is Verdict.BAD and out.tries == [Verdict.GOOD, Verdict.GOOD, Verdict.BAD]
    assert (deployer.deploys, deployer.smoke_calls) == (1, 2)


def test_a_deploy_that_did_not_smoke_gets_smoked() -> None:
    deployer = ScriptedDeployer(Deployed(True, False, "nothing changed"), [Verdict.BAD])
    out = DeployingStepRunner(base(), deployer, None).run(PROBE, 1)
    assert out.verdict is Verdict.BAD and deployer.smoke_calls == 1 and not out.restarted


def test_run_command_judges_after_the_deploy_with_the_server_url() -> None:
    out = io.StringIO()
    deployer = ScriptedDeployer(Deployed(True, True, "ok"))
    judge = CommandJudge('echo "$K26_BISECT_URL $K26_BISECT_VALUE"; exit 125', stream=out)
    result = DeployingStepRunner(base(), deployer, judge).run(PROBE, 1)
    assert result.verdict is Verdict.SKIP and out.getvalue().strip() == "http://127.0.0.1:30000 9"


def smoke_report(passed: bool) -> SmokeReport:
    """A real smoke report that passed, or failed on one suite finding."""
    nothing = Finding("drafter_accepts_nothing", 1.0, 1.05, (0, 0), "", "nothing accepted")
    failing = [] if passed else [nothing]
    return SmokeReport("http://127.0.0.1:30000", "m", "default", 2, [], suite_findings=failing)


def test_reading_deploy_results() -> None:
    ready_fail = DeployResult(
        profile="p",
        host="h",
        unit="u",
        verdict="failed",
        failure="readiness",
        restarted=True,
        message="exited",
        journal_lines=["boom"],
    )
    got = deployed_from_result(ready_fail)
    assert (got.up, got.restarted, got.smoke_verdict) == (False, True, None) and got.detail.endswith("boom")
    smoke_fail = DeployResult(
        profile="p",
        host="h",
        unit="u",
        verdict="failed",
        failure="smoke",
        restarted=True,
        smoke=smoke_report(False),
    )
    assert deployed_from_result(smoke_fail).smoke_verdict is Verdict.BAD
    fine = DeployResult(profile="p", host="h", unit="u", smoke=smoke_report(True))
    assert deployed_from_result(fine).smoke_verdict is Verdict.GOOD and deployed_from_result(fine).up


def test_the_restart_load_time_goes_from_the_deploy_into_the_step_and_its_records() -> None:
    from k26ctl.bisect.session import StepRecord

    result = DeployResult(
        profile="p", host="h", unit="u", restarted=True, load_seconds=8.4, smoke=smoke_report(True)
    )
    deployed = deployed_from_result(result)
    assert deployed.load_seconds == 8.4
    outcome = DeployingStepRunner(base(), ScriptedDeployer(deployed), None).run(PROBE, 1)
    assert outcome.load_seconds == 8.4
    record = StepRecord(1, {KEY: 9}, Verdict.GOOD, 20.0, True, ["good"], "ok", load_seconds=8.4)
    assert StepRecord.from_json(record.to_json()).load_seconds == 8.4
    assert StepRecord.from_json({**record.to_json(), "load_seconds": None}).load_seconds is None
    assert (
        StepRecord.from_json({k: v for k, v in record.to_json().items() if k != "load_seconds"}).load_seconds
        is None
    )
    with pytest.raises(ValidationError, match="load_seconds"):  # a damaged record is named, never misread
        StepRecord.from_json({**record.to_json(), "load_seconds": "eight"})
