"""The restart phases as text (deploy's report, status): one line per phase, shares of the downtime."""

from __future__ import annotations

from pathlib import Path

from k26ctl.cli.present.phases import phase_lines
from k26ctl.deploy.phases import parse_phases
from k26ctl.remote.systemd import parse_journal_line

DATA = Path(__file__).resolve().parents[1] / "deploy" / "data" / "phases" / "restart-0.5.23-cpu.jsonl"


def test_one_line_per_phase_with_seconds_share_and_evidence() -> None:
    entries = [e for e in map(parse_journal_line, DATA.read_text().splitlines()) if e is not None]
    phases = parse_phases(entries)
    lines = phase_lines(phases.to_json(), indent="", evidence=True)
    assert lines[0] == f"restart phases: stop -> ready {phases.downtime_seconds:.1f} s, SGLang 0.5.23 lines"
    rows = [line for line in lines[1:] if not line.lstrip().startswith("|")]
    assert len(rows) == len(phases.phases)
    stop = rows[0].split()
    assert stop[:3] == ["old", "server", "stopping"] and stop[3] == f"{phases.phases[0].duration:.1f}"
    assert any("(16384 tokens)" in row for row in rows)
    assert "| [2026-12-05 08:02:21] Init parallel begin." in "\n".join(lines)


def test_nothing_to_show_without_phases() -> None:
    assert phase_lines({"phases": [], "ready": False, "start_seconds": 0}) == []
