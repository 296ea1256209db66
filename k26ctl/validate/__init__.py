"""Validation: everything that can be known wrong about a profile before a 7-minute restart.

`options` reads the rendered argv against SGLang's own option table, `rules` judges it, `systemd_verify`
runs `systemd-analyze verify` on the unit, `on_host` asks the host's own SGLang parser, and `checks`
strings them together into the entry points re-exported here.
"""

from __future__ import annotations

from k26ctl.validate.checks import (
    collect_findings,
    ensure_unit_verifies,
    ensure_valid,
    validate_profile,
    validate_with_host,
)
from k26ctl.validate.findings import Finding, Level, ValidationReport, merge_findings
from k26ctl.validate.on_host import remote_findings
from k26ctl.validate.options import (
    SGLANG_ENTRYPOINTS,
    Option,
    OptionTable,
    ParsedArgs,
    load_option_table,
    parse_flags,
)
from k26ctl.validate.releases import OPTION_TABLE, ReleaseCatalog, load_catalog
from k26ctl.validate.rules import RULES, Context, known_patch_names, rule
from k26ctl.validate.systemd_verify import interpret_verify, missing_executable_line, verify_unit_locally

__all__ = [
    "OPTION_TABLE",
    "RULES",
    "SGLANG_ENTRYPOINTS",
    "Context",
    "Finding",
    "Level",
    "Option",
    "OptionTable",
    "ParsedArgs",
    "ReleaseCatalog",
    "ValidationReport",
    "collect_findings",
    "ensure_unit_verifies",
    "ensure_valid",
    "interpret_verify",
    "known_patch_names",
    "load_catalog",
    "load_option_table",
    "merge_findings",
    "missing_executable_line",
    "parse_flags",
    "remote_findings",
    "rule",
    "validate_profile",
    "validate_with_host",
    "verify_unit_locally",
]
