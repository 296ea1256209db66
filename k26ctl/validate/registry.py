"""The list every validate rule joins: `@rule` on a function from a `Context` to findings. Its own module
so rules kept in modules of their own (warm_caches, ...) register without importing rules.py."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from k26ctl.validate.context import Context
from k26ctl.validate.findings import Finding

Rule = Callable[[Context], Iterator[Finding]]
RULES: list[Rule] = []


def rule(fn: Rule) -> Rule:
    RULES.append(fn)
    return fn
