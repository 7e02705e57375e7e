"""The ``memvault`` command."""

from __future__ import annotations

import argparse
import logging
import sys

from memvault import __version__


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memvault", description="Governed memory and exact run state for AI agents."
    )
    parser.add_argument("--version", action="version", version=f"memvault {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands.add_parser(
        "demo", help="walk through the memory service on the embedded store (no AWS needed)"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "demo":
        from memvault_local import demo

        # The demo narrates; the service's structured logs would only add noise here.
        logging.getLogger("memvault").setLevel(logging.WARNING)
        return demo.main(sys.stdout)
    return 2


if __name__ == "__main__":
    sys.exit(main())
