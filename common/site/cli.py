"""``dfa site``: build the course website (the ``site`` extra: Sphinx and myst-nb)."""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

from common.errors import DFAError

DEFAULT_OUT = "build/site"


def add_commands(sub) -> None:
    p = sub.add_parser("site", help="build the course website (static HTML) from the READMEs, release labs, "
                                    "catalog and fidelity results (the site extra)")
    p.add_argument("--out", default=DEFAULT_OUT, help=f"build folder; the site is OUT/html (default: {DEFAULT_OUT})")
    p.add_argument("--root", default=None, help="the repository to build from (default: this checkout)")
    p.set_defaults(func=cmd_site)


def cmd_site(args: argparse.Namespace) -> int:
    missing = [m for m in ("sphinx", "myst_nb") if importlib.util.find_spec(m) is None]
    if missing:
        raise DFAError(f"dfa site needs {', '.join(missing)}: pip install -e \".[site]\"")
    from common.grading.courses.course import repo_root
    from common.site.build import build

    root = Path(args.root).resolve() if args.root else repo_root()
    site = build(Path(args.out).resolve(), root)
    print(f"dfa site: {len(site.pages)} pages in {site.seconds:.1f} s -> {site.index}")
    return 0
