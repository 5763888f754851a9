"""The ``dfa`` command. Each area of the package contributes its own sub-commands.

A module listed in ``COMMAND_MODULES`` exposes ``add_commands(subparsers)``; every sub-command sets
``func(args) -> int``. A ``DFAError`` becomes one line on stderr and exit code 2 (``--traceback`` shows it all).

Building the parser must stay cheap (``dfa --help`` and argument errors answer in well under a second): the
command modules import only the standard library and ``common.errors`` at the top, and import torch, pandas,
matplotlib or nbgrader inside their command functions. ``tests/test_cli.py`` checks that none of them gets loaded.

May import: every other package: ``chips`` ``compile`` ``dataflow`` ``debug`` ``graph`` ``grading`` ``landscape``
``measure`` ``memory`` ``models`` ``roofline`` ``sim`` ``site``.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys
import time

from common.errors import DFAError

# Order is the order of ``dfa --help``. A module that fails to import (e.g. an optional dependency missing)
# hides only its own commands and says so in --help.
COMMAND_MODULES = ("common.cli.tour", "common.cli.lab", "common.cli.simulate", "common.grading.cli", "common.site.cli")


class _Parser(argparse.ArgumentParser):
    """Argument errors are one line, like a DFAError's; the usage is one ``--help`` away."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
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


def process_age_s() -> float:
    """Seconds since this process started (interpreter start-up included), from /proc; 0.0 where unknown."""
    try:
        with open("/proc/self/stat") as f:
            # field 22, starttime, in clock ticks since boot; the name in field 2 may hold spaces, hence ")"
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        return max(0.0, time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError, AttributeError):
        return 0.0


def main(argv: list[str] | None = None) -> int:
    # ``args.started`` (a perf_counter reading) lets a command report true wall time. Run as the ``dfa``
    # command (argv None), the clock starts with the process; called from Python, it starts here.
    started = time.perf_counter() - (process_age_s() if argv is None else 0.0)
    if argv is None:  # the dfa command's own process (not a caller's Python): skip an import nbformat never uses
        from common.grading.sandbox.quick_start import skip_unused_iri_check

        skip_unused_iri_check()
    parser = build_parser()
    args = parser.parse_args(argv)
    args.started = started
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

