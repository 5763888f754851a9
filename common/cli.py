"""The ``dfa`` command. Each area of the package contributes its own sub-commands.

A module listed in ``COMMAND_MODULES`` exposes ``add_commands(subparsers)``; every sub-command sets
``func(args) -> int``. A ``DFAError`` becomes one line on stderr and exit code 2 (``--traceback`` shows it all).
"""
from __future__ import annotations

import argparse
import importlib
import sys

from common.errors import DFAError

# Order is the order of ``dfa --help``. A module that fails to import (e.g. an optional dependency missing)
# hides only its own commands and says so in --help.
COMMAND_MODULES = ("common.tour", "common.sim.cli", "common.grading.cli")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dfa",
        description="Dataflow Architectures for AI - open labs: catalog, simulators, roofline and grading tools.",
    )
    parser.add_argument("--traceback", action="store_true", help="show the full traceback on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    missing = []
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name and (exc.name == name or name.startswith(exc.name + ".")):
                continue  # that area is not built yet
            missing.append(f"{name} (needs {exc.name})")
            continue
        module.add_commands(sub)
    if missing:
        parser.epilog = "commands unavailable: " + "; ".join(missing)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    try:
        return int(args.func(args) or 0)
    except DFAError as exc:
        if args.traceback:
            raise
        print(f"dfa: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
