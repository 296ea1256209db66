"""Reading a fleet file's YAML, and telling a fleet file from a profile without loading the fleet
model (deploy, status and rollback ask this of every profile they are given)."""

from __future__ import annotations

from pathlib import Path

import yaml

from k26ctl import inputs, yamlsafe
from k26ctl.errors import ConfigError


def read_fleet_yaml(path: Path) -> object:
    text = inputs.read_text(
        path, what="fleet file", max_bytes=inputs.MAX_PROFILE_BYTES, hint="check the path"
    )
    try:
        return yamlsafe.load(text, str(path))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        raise ConfigError(f"{where}: {getattr(exc, 'problem', None) or 'invalid YAML'}") from None


def is_fleet_file(path: str | Path) -> bool:
    """A YAML file whose top-level mapping has the key `fleet` (profiles never do)."""
    path = Path(path)
    if not path.is_file():  # FIFOs, devices and directories are left to the profile reader's refusal
        return False
    try:
        head = inputs.read_text(path, what="fleet file", max_bytes=inputs.MAX_PROFILE_BYTES)
    except ConfigError:
        return False
    if not any(line.startswith("fleet:") for line in head.splitlines()):
        return False
    data = read_fleet_yaml(path)
    return isinstance(data, dict) and "fleet" in data
