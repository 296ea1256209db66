"""The conformance inventory (k26ctl/data/conformance.yaml): what k26ctl reads from a host, as data."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

INVENTORY_FILE = Path(__file__).resolve().parent.parent / "data" / "conformance.yaml"


class _Shape(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SGLangPart(_Shape):
    verified: list[str]
    option_tables: str
    branch: str
    affects_unverified: str
    affects_no_table: str


class GpuPart(_Shape):
    known: dict[str, str]
    affects_new: str
    affects_unreadable: str
    doc: str


class JournalLine(_Shape):
    id: str
    pattern: str
    doc: str
    affects: str
    expected: bool


class Endpoint(_Shape):
    path: str
    alias: str | None = None
    doc: str
    affects: str


class ServerInfoPart(_Shape):
    keys: list[str]
    doc: str
    affects: str


class MetricsPart(_Shape):
    names: list[str]
    doc: str
    speculative_only: list[str]
    affects: str


class Inventory(_Shape):
    format: Literal["k26ctl-conformance/1"]
    document: str
    sglang: SGLangPart
    gpu: GpuPart
    journal: list[JournalLine]
    http: list[Endpoint]
    server_info: ServerInfoPart
    metrics: MetricsPart

    def doc_texts(self) -> list[str]:
        """Every text the inventory claims docs/conformance.md holds verbatim."""
        return [
            self.gpu.doc,
            *(j.doc for j in self.journal),
            *(e.doc for e in self.http),
            self.server_info.doc,
            self.metrics.doc,
        ]


@cache
def load_inventory(path: Path = INVENTORY_FILE) -> Inventory:
    from k26ctl import yamlsafe

    return Inventory.model_validate(yamlsafe.load(path.read_text(encoding="utf-8"), str(path)))
