"""The `research` command line."""

from __future__ import annotations

import typer

app = typer.Typer(help="Research coordinator: fan a question out to five MCP sources.", no_args_is_help=True)
