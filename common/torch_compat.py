"""Which torch this package needs: the one constant, and the one-line refusal when the installed torch is older.

``import common`` calls ``require_torch()``. On torch 2.10 and older the ``dfa_*`` backends fail inside
Dynamo's fake-mode check and ``common.graph.costs`` fails at import (``aten._fused_rms_norm`` is missing before 2.8),
deep in a traceback that names neither torch nor its version. So the package refuses at once, in one line that
names the torch it found, the one it needs and the command that fixes it.

The check reads torch's package metadata instead of importing torch: ``import common`` and ``dfa --help``
stay fast (importing torch takes seconds). pyproject.toml's ``torch>=`` bound must equal ``MIN_TORCH``
(tests/test_torch_compat.py checks it); .ci/torch-matrix runs the tests on that floor and on the newest torch.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from importlib import metadata
from pathlib import Path

MIN_TORCH = (2, 11)
PACKAGE = "dataflow-labs"


class TorchVersionError(ImportError):
    """torch is missing or older than ``MIN_TORCH``. The message is one line, with the fix."""

    def _render_traceback_(self) -> list[str]:
        # IPython (Jupyter, Colab) shows an exception that has this method as these lines instead of a
        # traceback through the import machinery: the learner sees only the message.
        return [str(self)]


def floor() -> str:
    return ".".join(map(str, MIN_TORCH))


def requirement() -> str:
    """The pip requirement, e.g. ``torch>=2.11``."""
    return f"torch>={floor()}"


def release_of(version: str) -> tuple[int, ...]:
    """The release numbers of a torch version: ``2.11.0+cu130``, ``2.11.0a0+git1a2b`` (a container's source
    build) and ``2.12.0.dev20260101`` (a nightly) give (2, 11, 0), (2, 11, 0), (2, 12, 0). A pre-release of
    the floor counts as the floor: such builds carry its features, and refusing them would only get in the
    way of people on vendor containers."""
    match = re.match(r"\s*v?(\d+(?:\.\d+)*)", str(version))
    return tuple(int(part) for part in match.group(1).split(".")) if match else ()


def supported(version: str) -> bool:
    return release_of(version) >= MIN_TORCH


def installed_version() -> str | None:
    """The version pip installed, from torch's metadata (milliseconds; no import of torch), or None."""
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None


def loaded_version() -> str | None:
    """The version of the torch this Python has imported already, if it has. It wins over the metadata: after
    ``pip install -U torch`` in a running notebook the old torch is still the one in memory."""
    torch = sys.modules.get("torch")
    version = getattr(torch, "__version__", None)
    return str(version) if version else None


def _fix() -> str:
    pip = "%pip" if "ipykernel" in sys.modules else "pip"  # in a notebook the magic installs into its kernel
    return f'{pip} install -U "{requirement()}"'


def problem(installed: str | None, loaded: str | None = None) -> str | None:
    """The one-line message for this torch, or None when it will do."""
    needs = f"{PACKAGE} needs torch >= {floor()}"
    if loaded is not None and not supported(loaded):
        if installed is not None and supported(installed):  # upgraded on disk, the old one still in memory
            return f"{needs}, found {loaded} loaded ({installed} installed): restart the Python session"
        return f"{needs}, found {loaded}: {_fix()}, then restart the Python session"
    if loaded is not None:
        return None
    if installed is None:
        if importlib.util.find_spec("torch") is not None:
            return None  # a torch without metadata (a source tree on sys.path): no version to judge; trust it
        return f'{needs}, found none: {_fix().replace(" -U", "")}'
    if not supported(installed):
        return f"{needs}, found {installed}: {_fix()}"
    return None


def _running_dfa() -> bool:
    """Whether this Python is the ``dfa`` command (its console script, or ``python -m common.cli``). The
    script imports ``common.cli``, and so this package, before ``main`` runs: main's one-line error
    handling never sees an error raised during that import, so ``require_torch`` does the same job."""
    argv = getattr(sys, "argv", None) or [""]
    if Path(argv[0]).stem == "dfa":
        return True
    orig = getattr(sys, "orig_argv", [])
    return any(flag == "-m" and module == "common.cli" for flag, module in zip(orig, orig[1:], strict=False))


def require_torch() -> None:
    """Raise ``TorchVersionError`` (one line) unless a torch >= ``MIN_TORCH`` is installed; in the ``dfa``
    command print that line as ``dfa: error: ...`` and exit 2, like every other dfa error."""
    message = problem(installed_version(), loaded_version())
    if message is None:
        return
    if _running_dfa():
        print(f"dfa: error: {message}", file=sys.stderr)
        raise SystemExit(2)
    raise TorchVersionError(message)
