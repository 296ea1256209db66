"""Patch definitions: what a source patch is, loaded from `templates/patches/*.yaml`.

A patch names one target file (relative to the SGLang package root, i.e. the `sglang/` directory),
a list of anchored edits on whole lines, the releases it was written for, and optionally the lines
whose presence means the release no longer needs it.
"""

from __future__ import annotations

import difflib
import textwrap
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path, PurePosixPath
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from k26ctl.errors import ConfigError

EditOp = Literal["insert_after", "insert_before", "replace"]


@dataclass(frozen=True)
class Edit:
    """One anchored edit. `anchor` lines are matched whole, ignoring indentation; `lines` carry
    indentation relative to the first anchor line's indentation."""

    op: EditOp
    anchor: tuple[str, ...]
    lines: tuple[str, ...]
    count: int = 1

    def preview(self) -> str:
        first = self.anchor[0].strip()
        more = f" (+{len(self.anchor) - 1} lines)" if len(self.anchor) > 1 else ""
        return f"`{first}`{more}"


@dataclass(frozen=True)
class NotNeeded:
    reason: str
    any_line: tuple[str, ...]


@dataclass(frozen=True)
class Patch:
    name: str
    summary: str
    description: str
    target: str
    versions: tuple[str, ...]
    edits: tuple[Edit, ...]
    not_needed: NotNeeded | None = None
    source: Path | None = None


# ---- YAML schema ---------------------------------------------------------------------------------


class _EditSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    anchor: str
    count: int = Field(default=1, ge=1)
    insert_after: str | None = None
    insert_before: str | None = None
    replace: str | None = None

    @model_validator(mode="after")
    def _one_op(self) -> _EditSpec:
        ops = [op for op in ("insert_after", "insert_before", "replace") if getattr(self, op) is not None]
        if len(ops) != 1:
            raise ValueError("give exactly one of insert_after, insert_before, replace")
        return self


class _NotNeededSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str
    any_line: list[str] = Field(min_length=1)


class _PatchSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    summary: str
    description: str = ""
    target: str
    versions: list[str] = Field(default_factory=list)
    not_needed: _NotNeededSpec | None = None
    edits: list[_EditSpec] = Field(min_length=1)

    @field_validator("target")
    @classmethod
    def _relative_target(cls, value: str) -> str:
        path = PurePosixPath(value)
        if path.is_absolute() or ".." in path.parts or not value.endswith(".py"):
            raise ValueError("target must be a .py path relative to the sglang package root")
        return str(path)

    @field_validator("versions", mode="before")
    @classmethod
    def _versions_as_text(cls, value: object) -> object:
        if isinstance(value, list):
            return [str(v) for v in value]
        return value


def _block(text: str) -> tuple[str, ...]:
    """A YAML block as lines: common indentation removed, trailing blank lines dropped."""
    lines = textwrap.dedent(text).splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    return tuple(line.rstrip() for line in lines)


def _edit_from_spec(spec: _EditSpec, where: str) -> Edit:
    op: EditOp
    if spec.insert_after is not None:
        op, body = "insert_after", spec.insert_after
    elif spec.insert_before is not None:
        op, body = "insert_before", spec.insert_before
    else:
        op, body = "replace", spec.replace or ""
    anchor = _block(spec.anchor)
    if not anchor or any(not line.strip() for line in anchor):
        raise ConfigError(f"{where}: an anchor must be one or more non-blank lines")
    lines = _block(body)
    if op != "replace" and not lines:
        raise ConfigError(f"{where}: {op} needs at least one line")
    if _contains(lines, anchor):
        raise ConfigError(
            f"{where}: the new lines contain the edit's own anchor, so matches could not be counted"
        )
    return Edit(op=op, anchor=anchor, lines=lines, count=spec.count)


def _contains(lines: tuple[str, ...], seq: tuple[str, ...]) -> bool:
    wanted = [s.strip() for s in seq]
    have = [s.strip() for s in lines]
    return any(have[i : i + len(wanted)] == wanted for i in range(len(have) - len(wanted) + 1))


def parse_patch(data: object, where: str = "patch", source: Path | None = None) -> Patch:
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: a patch must be a mapping")
    try:
        spec = _PatchSpec.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise ConfigError(f"{where}: {loc}: {err['msg']}", "see templates/patches/*.yaml") from None
    edits = tuple(_edit_from_spec(e, f"{where}: edits[{i}]") for i, e in enumerate(spec.edits))
    not_needed = (
        NotNeeded(spec.not_needed.reason, tuple(line.strip() for line in spec.not_needed.any_line))
        if spec.not_needed
        else None
    )
    return Patch(
        name=spec.name,
        summary=spec.summary,
        description=spec.description.strip(),
        target=spec.target,
        versions=tuple(spec.versions),
        edits=edits,
        not_needed=not_needed,
        source=source,
    )


def load_patch_file(path: Path) -> Patch:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read patch {path}: {exc}") from None
    patch = parse_patch(data, str(path), path)
    if patch.name != path.stem:
        raise ConfigError(f"{path}: name {patch.name!r} differs from the file name", "rename one of them")
    return patch


def patches_dir() -> Path:
    from k26ctl.resources import templates_dir

    return templates_dir() / "patches"


@cache
def _load_dir(directory: Path) -> dict[str, Patch]:
    return {p.stem: load_patch_file(p) for p in sorted(directory.glob("*.yaml"))}


def load_patches(directory: Path | None = None) -> dict[str, Patch]:
    """All shipped patches by name, in file-name order."""
    return dict(_load_dir((directory or patches_dir()).resolve()))


def select_patches(names: Iterable[str], directory: Path | None = None) -> list[Patch]:
    """The named patches, in the order given; unknown names are a config error with a suggestion."""
    catalog = load_patches(directory)
    chosen: list[Patch] = []
    for name in names:
        if name not in catalog:
            guess = difflib.get_close_matches(name, list(catalog), n=1, cutoff=0.5)
            hint = (
                f"did you mean '{guess[0]}'?" if guess else f"known patches: {', '.join(catalog) or 'none'}"
            )
            raise ConfigError(f"unknown patch '{name}'", hint)
        if catalog[name] not in chosen:
            chosen.append(catalog[name])
    return chosen
