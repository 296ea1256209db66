"""A smoke suite with tool-call prompts needs a server that parses tool calls.

SGLang answers a chat request's `tools` with `message.tool_calls` only under `--tool-call-parser`
(0.5.15 serving_chat.py:1348-1360); without one the call stays raw text in the content and smoke can
only skip the tool-call prompts (`tool_call_skipped`). So validate warns before the deploy.

The suite is read as data (its prompts' `tools`), not through the smoke package, which sits beside
validate in the import layers: a shipped name resolves to k26ctl/smoke/suites/NAME.yaml, anything else is
a path. A suite that cannot be read is left to smoke, which names the problem.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import k26ctl
from k26ctl.validate.context import Context
from k26ctl.validate.findings import Finding
from k26ctl.validate.registry import rule

SHIPPED_SUITES = Path(k26ctl.__file__).resolve().parent / "smoke" / "suites"
MAX_SUITE_BYTES = 1 << 20


def suite_file(ref: str) -> Path:
    path = Path(ref)
    if len(path.parts) == 1 and not path.suffix and not path.exists():
        return SHIPPED_SUITES / f"{ref}.yaml"
    return path


def tool_prompts(ref: str) -> list[str] | None:
    """Ids of the suite's prompts that declare tools; None when the suite cannot be read."""
    import yaml

    from k26ctl import inputs, yamlsafe
    from k26ctl.errors import K26Error

    try:
        text = inputs.read_text(suite_file(ref), what="suite", max_bytes=MAX_SUITE_BYTES)
        data: Any = yamlsafe.load(text, ref)
    except (K26Error, yaml.YAMLError, ValueError):
        return None
    prompts = data.get("prompts") if isinstance(data, dict) else None
    if not isinstance(prompts, list):
        return None
    return [str(p.get("id")) for p in prompts if isinstance(p, dict) and p.get("tools")]


@rule
def suite_needs_tool_call_parser(ctx: Context) -> Iterator[Finding]:
    if ctx.args.get("tool_call_parser"):
        return
    ref = ctx.profile.smoke.suite or "default"
    prompts = tool_prompts(ref)
    if prompts:
        shown = ", ".join(prompts)
        yield Finding(
            "warning",
            "smoke/no-tool-call-parser",
            f"smoke suite '{ref}' has tool-call prompts ({shown}) but the server runs without "
            "--tool-call-parser: smoke will not ask them",
            "set sglang.tool_call_parser (kimi_k2 for Kimi K2.x), or use a suite without tools",
        )
