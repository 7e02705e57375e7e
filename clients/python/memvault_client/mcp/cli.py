"""The command line of the MCP server: ``memvault-mcp``, ``memvault mcp`` and ``python -m
memvault_client.mcp``.
Nothing here imports the MCP SDK until the server starts."""

from __future__ import annotations

import argparse
import sys

from memvault_client.mcp.config import ConfigError, add_arguments, settings_from_args


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="memvault-mcp", description="memvault's memory tools as an MCP server"
    )
    add_arguments(parser)
    return run_args(parser.parse_args(argv))


def run_args(args: argparse.Namespace) -> int:
    """Start the server from parsed options: a configuration problem, or the MCP SDK
    missing, is one line on stderr and exit 2, never a traceback."""
    try:
        settings = settings_from_args(args)
    except ConfigError as err:
        print(f"memvault mcp: {err}", file=sys.stderr)
        return 2
    try:
        from memvault_client.mcp.server import run
    except ImportError as err:
        print(
            f"memvault mcp: the MCP SDK is not installed ({err.name}): "
            "pip install 'memvault-client[mcp]'",
            file=sys.stderr,
        )
        return 2
    return run(settings)
