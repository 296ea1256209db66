"""Every command is registered the same way and uses the shared option helpers of cli/common.py."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

import pytest
import typer.main

from k26ctl.cli import app as app_module
from k26ctl.cli import common


def _walk(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, Any]]:
    subcommands = getattr(command, "commands", None)
    if subcommands:
        for name, sub in subcommands.items():
            yield from _walk(sub, (*path, name))
    else:
        yield " ".join(path), command


COMMANDS = dict(_walk(typer.main.get_command(app_module.app)))


def _option(command: Any, flag: str) -> Any | None:
    return next((p for p in command.params if flag in getattr(p, "opts", ())), None)


def test_the_tree_holds_every_command() -> None:
    expected = [
        "deploy",
        "smoke",
        "status",
        "logs",
        "rollback",
        "render",
        "validate",
        "score",
        "bisect-config start",
        "bisect-config log",
        "bisect-config replay",
        "bisect-config reset",
        "sweep start",
        "sweep log",
        "sweep reset",
        "patch apply",
        "lab demo",
        "lab host up",
    ]
    assert [name for name in expected if name not in COMMANDS] == []


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_commands_are_module_level_functions_of_a_module_with_register(name: str) -> None:
    callback = COMMANDS[name].callback
    assert callback.__module__.startswith("k26ctl.cli.")
    assert "<locals>" not in callback.__qualname__, f"{name}: defined inside a function"
    module = inspect.getmodule(callback)
    assert module is not None and inspect.isfunction(getattr(module, "register", None))
    assert list(inspect.signature(module.register).parameters) in (["app"], ["lab_app"])


SHARED = {
    "--accept-new-host-key": common.accept_new_host_key_option(),
    "--set": common.set_option(),
    "--yes": common.yes_option(),
}


@pytest.mark.parametrize("flag", sorted(SHARED))
def test_shared_options_come_from_the_helpers(flag: str) -> None:
    expected = SHARED[flag]
    users = {name: opt for name, cmd in COMMANDS.items() if (opt := _option(cmd, flag)) is not None}
    assert users, f"nothing uses {flag}"
    for name, opt in users.items():
        assert opt.help == expected.help, f"{name} {flag}: help differs from cli/common.py's helper"
        assert sorted(opt.opts) == sorted(expected.param_decls), name


def test_commands_that_reach_a_host_accept_a_new_host_key() -> None:
    reaching = ["deploy", "smoke", "status", "logs", "rollback", "validate", "patch status", "patch apply",
                "patch revert", "bisect-config start", "bisect-config replay", "bisect-config reset",
                "sweep start", "sweep reset"]  # fmt: skip
    missing = [name for name in reaching if _option(COMMANDS[name], "--accept-new-host-key") is None]
    assert missing == []


def test_profile_arguments_read_the_same() -> None:
    for name, cmd in COMMANDS.items():
        for param in cmd.params:
            if param.param_type_name == "argument" and param.name in ("profile", "target"):
                assert param.metavar == "PROFILE", name
