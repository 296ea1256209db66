"""The alert rules shipped with the watcher (data/alerts.yml), for `k26ctl watch rules`."""

from __future__ import annotations

from pathlib import Path

RULES_FILE = Path(__file__).resolve().parent / "data" / "alerts.yml"


def alert_rules() -> str:
    return RULES_FILE.read_text(encoding="utf-8")
