"""Thin Typer commands: parse options, call the library, present the result."""
