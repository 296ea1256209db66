"""DefaultCommandGroup routing, on a small group whose commands report what they received."""

from __future__ import annotations

import json

import typer
from typer.testing import CliRunner

from k26ctl.cli.common import DefaultCommandGroup


def _group() -> typer.Typer:
    app = typer.Typer(rich_markup_mode=None)

    @app.callback()
    def root() -> None:
        """Root."""

    group = typer.Typer(cls=DefaultCommandGroup, help="A group with a default command.")

    def start(
        profile: str | None = typer.Argument(None),
        param: str | None = typer.Option(None, "--param", "-p"),
        session: str = typer.Option("default", "--session"),
        resume: bool = typer.Option(False, "--resume"),
    ) -> None:
        """Start a search."""
        typer.echo(json.dumps({"command": "start", "profile": profile, "param": param,
                               "session": session, "resume": resume}))  # fmt: skip

    def log(
        session: str = typer.Option("default", "--session"), as_json: bool = typer.Option(False, "--json")
    ) -> None:
        """Print the log."""
        typer.echo(json.dumps({"command": "log", "session": session, "json": as_json}))

    def replay(file: str = typer.Argument(...), session: str = typer.Option("default", "--session")) -> None:
        """Replay FILE."""
        typer.echo(json.dumps({"command": "replay", "file": file, "session": session}))

    group.command("start")(start)
    group.command("log")(log)
    group.command("replay")(replay)
    app.add_typer(group, name="grp")
    return app


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(_group(), ["grp", *args])
    return result.exit_code, result.output


def routed(*args: str) -> dict[str, object]:
    code, output = run(*args)
    assert code == 0, output
    return json.loads(output)


def test_a_first_argument_that_names_no_command_goes_to_start() -> None:
    assert routed("my-profile.yaml", "--param", "k") == {
        "command": "start", "profile": "my-profile.yaml", "param": "k", "session": "default", "resume": False,
    }  # fmt: skip
    assert routed("--resume")["resume"] is True
    assert routed() == {
        "command": "start", "profile": None, "param": None, "session": "default", "resume": False,
    }  # fmt: skip


def test_a_command_word_runs_that_command() -> None:
    assert routed("log", "--json") == {"command": "log", "session": "default", "json": True}
    assert routed("replay", "saved.log") == {"command": "replay", "file": "saved.log", "session": "default"}
    assert routed("start", "log")["profile"] == "log"  # a profile named like a command, explicitly


def test_options_may_come_before_the_command_word() -> None:
    assert routed("--session", "s2", "log") == {"command": "log", "session": "s2", "json": False}
    assert routed("--json", "log")["json"] is True
    assert routed("--session=s3", "replay", "f")["session"] == "s3"


def test_an_option_value_that_looks_like_a_command_stays_a_value() -> None:
    assert routed("--param", "log", "p.yaml") == {
        "command": "start", "profile": "p.yaml", "param": "log", "session": "default", "resume": False,
    }  # fmt: skip
    assert routed("-p", "log", "p.yaml")["param"] == "log"
    assert routed("--", "log")["profile"] == "log"


def test_unknown_options_are_usage_errors_of_the_command_they_reached() -> None:
    code, output = run("--bogus")
    assert code == 2 and "No such option: --bogus" in output and "grp start" in output
    code, output = run("log", "--param", "k")
    assert code == 2 and "No such option: --param" in output and "grp log" in output
    code, output = run("replay")
    assert code == 2 and "Missing argument" in output
    code, output = run("p.yaml", "extra")
    assert code == 2 and "unexpected extra argument" in output


def test_help_is_the_group_help_with_its_commands() -> None:
    code, output = run("--help")
    assert code == 0
    assert "Usage: root grp [COMMAND] [ARGS]..." in output
    assert "A group with a default command." in output
    assert all(f"  {name}" in output for name in ("start", "log", "replay"))
    code, output = run("log", "--help")
    assert code == 0 and "Print the log." in output and "--json" in output
