"""SGLang's option tables, one per release (0.5.14 to 0.5.23), rebuilt from the compact generated file.

The file holds the oldest release in full and each later release as what it added, removed or changed
(scripts/gen_sglang_options.py reads them from each wheel's own parser). The DDTree branch's additions
(PR #29907) are listed apart and join every table, since a DDTree host runs that branch on a release.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from k26ctl.errors import ConfigError

OPTION_TABLE = Path(__file__).resolve().parent.parent / "data" / "sglang_options.json"
BRANCH_SOURCE = "pr-29907"
_RELEASE = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)")


def version_key(version: str) -> tuple[int, int, int] | None:
    match = _RELEASE.match(version.strip())
    return (int(match[1]), int(match[2]), int(match[3])) if match else None


@dataclass(frozen=True)
class Resolved:
    """Which table answers for a host version, and why (note is empty for an exact release)."""

    release: str | None  # None: no version given or not a release number, so every release counts
    note: str = ""


@dataclass
class ReleaseCatalog:
    releases: list[str]
    tables: dict[str, dict[str, dict[str, Any]]]  # release -> first flag -> option record
    algorithms: dict[str, list[str]]
    branch_options: list[dict[str, Any]]
    branch_algorithms: list[str]
    branch_name: str
    stubbed_modules: dict[str, list[str]] = field(default_factory=dict)

    @property
    def span(self) -> str:
        return f"{self.releases[0]}-{self.releases[-1]}"

    def resolve(self, version: str | None) -> Resolved:
        if not version:
            return Resolved(None)
        key = version_key(version)
        if key is None:
            return Resolved(None, f"sglang.version {version!r} is not a release number")
        base = ".".join(str(part) for part in key)
        if base in self.releases:
            return Resolved(base)
        keys = [version_key(r) for r in self.releases]
        older = [r for r, k in zip(self.releases, keys, strict=True) if k is not None and k <= key]
        if not older:
            return Resolved(
                self.releases[0], f"SGLang {version} is older than the oldest table ({self.releases[0]})"
            )
        return Resolved(older[-1], f"SGLang {version} has no table of its own; using {older[-1]}'s")

    def releases_with_flag(self, flag: str) -> list[str]:
        return [r for r in self.releases if any(flag in o["flags"] for o in self.tables[r].values())]

    def releases_with_choice(self, flag: str, value: str) -> list[str]:
        found = []
        for release in self.releases:
            for record in self.tables[release].values():
                if flag in record["flags"] and value in (record.get("choices") or ()):
                    found.append(release)
        return found

    def releases_with_algorithm(self, name: str) -> list[str]:
        return [r for r in self.releases if name in self.algorithms[r]]

    def last_record(self, flag: str) -> dict[str, Any] | None:
        for release in reversed(self.releases):
            for record in self.tables[release].values():
                if flag in record["flags"]:
                    return record
        return None

    def records_for(self, release: str | None) -> list[dict[str, Any]]:
        """The option records of one release, or of every release merged (choices joined)."""
        if release is not None:
            merged = dict(self.tables[release])
        else:
            merged = {}
            for table in self.tables.values():
                for key, record in table.items():
                    merged[key] = _join(merged.get(key), record)
        branch = {o["flags"][0]: {**o, "source": BRANCH_SOURCE} for o in self.branch_options}
        return [*merged.values(), *(o for k, o in branch.items() if k not in merged)]

    def algorithms_for(self, release: str | None) -> list[str]:
        if release is not None:
            return list(self.algorithms[release])
        return sorted({a for names in self.algorithms.values() for a in names})


def _join(old: dict[str, Any] | None, new: dict[str, Any]) -> dict[str, Any]:
    if old is None:
        return new
    joined = dict(new)
    if old.get("choices") is None or new.get("choices") is None:
        joined.pop("choices", None)
    else:
        joined["choices"] = [*old["choices"], *(c for c in new["choices"] if c not in old["choices"])]
    joined["flags"] = [*old["flags"], *(f for f in new["flags"] if f not in old["flags"])]
    return joined


def build_catalog(raw: dict[str, Any]) -> ReleaseCatalog:
    current = {o["flags"][0]: o for o in raw["base"]["options"]}
    algorithms = list(raw["base"]["algorithms"])
    tables = {raw["base"]["version"]: dict(current)}
    algos = {raw["base"]["version"]: list(algorithms)}
    for delta in raw["deltas"]:
        current = dict(current)
        for flag in delta["removed"]:
            current.pop(flag, None)
        for record in [*delta["added"], *delta["changed"]]:
            current[record["flags"][0]] = record
        algorithms = [a for a in algorithms if a not in delta["algorithms_removed"]]
        algorithms += delta["algorithms_added"]
        tables[delta["version"]] = current
        algos[delta["version"]] = list(algorithms)
    branch = raw.get("branches", {}).get("ddtree", {})
    return ReleaseCatalog(
        releases=list(raw["releases"]),
        tables=tables,
        algorithms=algos,
        branch_options=list(branch.get("options", [])),
        branch_algorithms=list(branch.get("algorithms", [])),
        branch_name=branch.get("name", "the DDTree branch"),
        stubbed_modules=dict(raw.get("stubbed_modules", {})),
    )


@cache
def load_catalog(path: Path = OPTION_TABLE) -> ReleaseCatalog:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        return build_catalog(raw)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(
            f"cannot read the SGLang option tables {path}: {exc}",
            "regenerate them: scripts/gen_sglang_options.py",
        ) from None
