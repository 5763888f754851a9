"""The repository passes its own linter (``ruff check``, configured in pyproject.toml), so that style drift shows
in the suite rather than in a later cleanup."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _ruff() -> list[str]:
    try:
        import ruff  # noqa: F401  (the contributor extra installs it)
    except ImportError:
        exe = shutil.which("ruff")
        if exe is None:
            pytest.skip("ruff is not installed (pip install -e '.[dev]')")
        return [exe]
    return [sys.executable, "-m", "ruff"]


def test_ruff_check_is_clean():
    r = subprocess.run([*_ruff(), "check", "--output-format", "concise", "."], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
