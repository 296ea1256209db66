"""YAML for profiles, `--set` values and suites: safe tags only, plus the limits PyYAML lacks.

* Duplicate keys are refused: PyYAML keeps the last one, so a second `sglang:` block would silently
  drop the first (model path, served name). Keys merged in with `<<:` may still be overridden.
* Nesting deeper than `MAX_DEPTH` is refused at the node that crosses it (PyYAML's composer recurses
  and fails with RecursionError a few hundred levels down).
* Integers longer than `MAX_NUMBER_CHARS` characters and non-finite floats (`.inf`, `.nan`) are
  refused (Python refuses integers past 4300 digits with a ValueError).

Each refusal is a `YAMLLimitError` (a ConfigError, exit 78) with the file position.

A double-quoted `"\\ud800"` escape becomes a lone surrogate in PyYAML's string; every string
scalar is made encodable (U+FFFD) as `k26ctl.jsonsafe` does for JSON.
"""

from __future__ import annotations

import math
from typing import Any

import yaml

from k26ctl.errors import ConfigError

MAX_DEPTH = 32
MAX_NUMBER_CHARS = 40


class YAMLLimitError(ConfigError):
    """Valid YAML that k26ctl refuses: duplicate keys, too deep, numbers too large."""


def _where(name: str, mark: Any) -> str:
    return f"{name}:{mark.line + 1}:{mark.column + 1}" if mark is not None else name


class StrictLoader(yaml.SafeLoader):
    source_name = "<yaml>"

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark
                raise YAMLLimitError(
                    f"{_where(self.source_name, mark)}: nested deeper than {MAX_DEPTH} levels",
                    "a profile nests a few levels; flatten the value",
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            seen: set[Any] = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    duplicate = key in seen
                except TypeError:  # unhashable key: the base constructor reports it
                    continue
                if duplicate:
                    raise YAMLLimitError(
                        f"{_where(self.source_name, key_node.start_mark)}: duplicate key {str(key)[:80]!r}",
                        "each key may appear once per mapping; merge the two blocks",
                    )
                seen.add(key)
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_int(self, node: Any) -> Any:
        text = str(node.value)
        if len(text) > MAX_NUMBER_CHARS:
            raise YAMLLimitError(
                f"{_where(self.source_name, node.start_mark)}: number with {len(text)} characters "
                f"(limit {MAX_NUMBER_CHARS})"
            )
        return super().construct_yaml_int(node)

    def construct_yaml_float(self, node: Any) -> Any:
        text = str(node.value)
        value = super().construct_yaml_float(node) if len(text) <= MAX_NUMBER_CHARS else math.inf
        if not math.isfinite(value):
            raise YAMLLimitError(
                f"{_where(self.source_name, node.start_mark)}: {text[:20]!r} is not a finite number"
            )
        return value

    def construct_yaml_str(self, node: Any) -> Any:
        from k26ctl.jsonsafe import encodable

        value = super().construct_yaml_str(node)
        return encodable(value)[0] if isinstance(value, str) else value


StrictLoader.add_constructor("tag:yaml.org,2002:str", StrictLoader.construct_yaml_str)
StrictLoader.add_constructor("tag:yaml.org,2002:int", StrictLoader.construct_yaml_int)
StrictLoader.add_constructor("tag:yaml.org,2002:float", StrictLoader.construct_yaml_float)


def load(text: str, source_name: str = "<yaml>") -> Any:
    """Parse `text` like `yaml.safe_load`, with the limits above. Syntax errors stay `yaml.YAMLError`."""
    loader = StrictLoader(text)
    loader.source_name = source_name
    try:
        return loader.get_single_data()
    except RecursionError:
        raise YAMLLimitError(f"{source_name}: nested too deeply", "flatten the value") from None
    finally:
        loader.dispose()
