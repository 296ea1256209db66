"""`doctor`'s two entry points: a host (collect, judge, maybe bundle) and a bundle (read, judge)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from k26ctl.doctor.checks import Row, check, exit_code, summary
from k26ctl.doctor.facts import Facts
from k26ctl.doctor.inventory import load_inventory
from k26ctl.documents import tagged


@dataclass
class DoctorReport:
    facts: Facts
    rows: list[Row]
    source: str  # "host" | the bundle's path
    bundle: str | None = None  # where the bundle was written

    @property
    def exit_code(self) -> int:
        return exit_code(self.rows)

    def to_json(self) -> dict[str, Any]:
        return tagged(
            "doctor",
            {
                "host": self.facts.host,
                "profile": self.facts.profile.name,
                "collected": self.facts.collected,
                "source": self.source,
                "bundle": self.bundle,
                "inventory": load_inventory().document,
                "summary": summary(self.rows),
                "rows": [r.to_json() for r in self.rows],
                "exit_code": self.exit_code,
            },
        )


def run_doctor(
    profile_path: str, overrides: list[str], *, bundle: Path | None = None, accept_new_host_key: bool = False
) -> DoctorReport:
    from k26ctl.doctor.bundle import write_bundle
    from k26ctl.doctor.collect import collect
    from k26ctl.outputs import check_writable
    from k26ctl.profile import load_profile
    from k26ctl.remote import connect

    loaded = load_profile(profile_path, overrides)
    if bundle is not None:
        check_writable(bundle, "--bundle")  # before the host is read, not after
    with connect(loaded.profile, accept_new_host_key=accept_new_host_key) as host:
        facts = collect(host, loaded.profile)
    if bundle is not None:
        write_bundle(bundle, facts)
    return DoctorReport(facts, check(facts, load_inventory()), "host", str(bundle) if bundle else None)


def explain_bundle(path: Path) -> DoctorReport:
    from k26ctl.doctor.bundle import read_bundle

    facts = read_bundle(path)
    return DoctorReport(facts, check(facts, load_inventory()), str(path))
