"""Findings and the report: what every validation check returns, and how a report is judged."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any, Literal

Level = Literal["error", "warning", "info"]


@dataclass(frozen=True)
class Finding:
    level: Level
    code: str
    message: str
    hint: str = ""

    def to_json(self) -> dict[str, str]:
        return asdict(self)


@dataclass
class ValidationReport:
    valid: bool
    findings: list[Finding]

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.level == "error"]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.level == "warning"]

    def codes(self) -> list[str]:
        return [f.code for f in self.findings]

    def to_json(self) -> dict[str, Any]:
        return {"valid": self.valid, "findings": [f.to_json() for f in self.findings]}


def finish(findings: list[Finding], strict: bool) -> ValidationReport:
    if strict:
        findings = [
            Finding("error", f.code, f.message, f.hint) if f.level == "warning" else f for f in findings
        ]
    order = {"error": 0, "warning": 1, "info": 2}
    findings = sorted(findings, key=lambda f: order[f.level])
    return ValidationReport(valid=not any(f.level == "error" for f in findings), findings=findings)


def merge_findings(
    report: ValidationReport, extra: Iterable[Finding], *, strict: bool = False
) -> ValidationReport:
    """A report with more findings (e.g. from the host's own parser), re-judged."""
    return finish([*report.findings, *extra], strict)
