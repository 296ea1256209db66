"""A lab host that is up without the real release a demo needs: `lab host up --real` refuses it, the
demos (which own their host) bring it down and up again with the release and say so."""

from __future__ import annotations

import pytest

from k26ctl.errors import ConfigError
from tests.support.hosts import lab_host_name

pytestmark = [pytest.mark.realsglang, pytest.mark.labhost, pytest.mark.lab, pytest.mark.timeout(900)]


def test_a_host_without_the_release_is_refused_or_rebuilt_with_a_line() -> None:
    from k26ctl.lab.host import lab_down, lab_status, lab_up, prerequisite_problem
    from k26ctl.lab.real.releases import RELEASES, installed

    reason = prerequisite_problem()
    if reason:
        pytest.skip(f"lab host unavailable: {reason}")
    if not installed(RELEASES[0]):
        pytest.skip(f"real SGLang {RELEASES[0]} not installed: run `bash scripts/bootstrap.sh --real-sglang`")
    name = lab_host_name("rb")
    try:
        plain = lab_up(name)
        assert RELEASES[0] not in plain.real_sglang
        with pytest.raises(ConfigError, match=f"is up without real SGLang {RELEASES[0]}"):
            lab_up(name, real_sglang=(RELEASES[0],))
        said: list[str] = []
        rebuilt = lab_up(name, real_sglang=(RELEASES[0],), rebuild=said.append)
        assert said == [
            f"lab host {name} is up without real SGLang {RELEASES[0]}: bringing it down and up again with it"
        ]
        assert RELEASES[0] in rebuilt.real_sglang and rebuilt.pid != plain.pid
        status = lab_status(name)
        assert status.running and status.host is not None and RELEASES[0] in status.host.real_sglang
        assert lab_up(name, real_sglang=(RELEASES[0],), rebuild=said.append).pid == rebuilt.pid
        assert len(said) == 1  # up with the release already: nothing to rebuild, nothing said
    finally:
        lab_down(name)
