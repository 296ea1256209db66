"""`k26ctl status`'s text: the unit's state, whether it matches the profile, readiness, patches, history."""

from __future__ import annotations

from typing import Any

from k26ctl.deploy.status import StatusReport
from k26ctl.termsafe import clean


def status_text(report: StatusReport) -> str:
    st = report.unit_state
    lines = [
        f"{report.unit} on {report.host}: {st.active_state}/{st.sub_state}, pid {st.main_pid}, "
        f"restarts {st.n_restarts}",
        f"unit {report.unit_path}: "
        + (
            "missing"
            if report.unit_sha is None
            else ("matches the profile" if report.unit_matches_profile else "differs from the profile")
        )
        + (" (daemon-reload pending)" if report.props.get("NeedDaemonReload") == "yes" else ""),
        "ready: "
        + (
            "yes"
            if report.probe and report.probe.ok
            else f"no ({report.probe.detail if report.probe else '-'})"
        ),
    ]
    if report.patch_error:
        lines.append(f"patches: unknown ({report.patch_error})")
    for patch in report.patches:
        lines.append(f"patch {patch.name}: {patch.state}")
    if report.history:
        lines.append("history (newest last):")
        for r in report.history:
            load = f" load {r.load_seconds:.1f}s" if r.load_seconds else ""
            sha = (r.unit_sha or "-")[:12]
            lines.append(
                f"  {r.time} {r.kind:<8} {r.profile or '-':<28} {r.verdict:<10} unit {sha}"
                f"{' restarted' if r.restarted else ''}{load}{_accept(r.smoke)} by {r.operator}"
            )
    restart = next((r for r in reversed(report.history) if r.phases), None)
    if restart is not None and restart.phases:
        from k26ctl.cli.present.phases import phase_lines

        lines.append(f"last restart ({restart.time}, {restart.profile or '-'}):")
        lines.extend(phase_lines(restart.phases))
    for problem in report.history_problems:
        lines.append(f"  history line skipped: {clean(problem, limit=300)}")
    return "\n".join(lines)


def _accept(smoke: dict[str, Any] | None) -> str:
    """The run's accept length beside its configuration's baseline (deploy/accept_baseline.py)."""
    value = (smoke or {}).get("accept_length")
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return ""
    found = (smoke or {}).get("accept_baseline")
    base = found.get("baseline") if isinstance(found, dict) else None
    if not isinstance(base, (int, float)) or isinstance(base, bool):
        return f" accept {value:.2f} (no baseline yet)" if isinstance(found, dict) else f" accept {value:.2f}"
    status = found.get("status") if isinstance(found, dict) else None
    mark = " BELOW" if status in ("warning", "failed") else ""
    return f" accept {value:.2f} (baseline {base:.2f}{mark})"
