"""``dfa lab [PATH]``: JupyterLab that opens a released lab unmodified.

Why an unedited lab showed as modified about 5 s after it opened: when a notebook's kernel starts, JupyterLab 4
(4.0 to 4.7, ``packages/notebook/src/panel.ts``) writes the kernel_info reply's ``language_info`` into the
notebook's metadata (``_updateLanguage``) and ``{name, display_name, language}`` of its kernel spec as
``kernelspec`` (``_updateSpec``). ``YNotebook.setMetadata`` (@jupyter/ydoc >= 1.0, ``ynotebook.ts``) skips a
value deep-equal to the one held and otherwise sets the document's ``dirty`` flag: closing then asks to save. A
release notebook holds what ipykernel reports, all but ``language_info.version``, the kernel's Python
(``sys.version.split()[0]``), which differs between learners, so no released file can hold it.

``dfa lab`` starts JupyterLab with ``common.cli.lab_contents.LabContentsManager``, Jupyter's default contents manager
that hands a released lab to the browser with what its kernel will report already in (``kernel_metadata``,
asked of the kernel spec and of the kernel's own interpreter and ipykernel): the kernel's writes then change
nothing. Nothing is written to disk: the file stays as released until the learner saves it (Jupyter then
writes the version, as it always does). Only a released lab (``dfa`` metadata, ``language_info`` as released:
ipykernel's without a version) is changed on its way; every other notebook passes as it is.

Imports here are the standard library and ``common.errors`` (``dfa --help`` stays fast, tests/test_cli.py).
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from common.errors import DFAError

CONTENTS_MANAGER = "common.cli.lab_contents.LabContentsManager"
LAB_KEY = "dfa"  # the notebook metadata key every released lab carries: {"course": ..., "lab": ...}
# What the kernel's interpreter prints: ipykernel's own language_info (its version is that interpreter's).
LANGUAGE_INFO_QUERY = (
    "import json; from ipykernel.ipkernel import IPythonKernel as K; print(json.dumps(K.language_info))"
)
QUERY_TIMEOUT_S = 60
INSTALL_HINT = "pip install -e '.[lab]' in the course repository (or: pip install jupyterlab)"


def _interpreter(argv: list[str]) -> str:
    """The program a kernel spec's argv starts, as jupyter_client resolves it (``python``/``python3`` → this one)."""
    first = argv[0]
    if first in {"python", f"python{sys.version_info[0]}", "python{}.{}".format(*sys.version_info[:2])}:
        return sys.executable
    return first


def kernel_metadata(kernel_name: str = "python3", spec_manager=None) -> dict | None:
    """``{"kernelspec": ..., "language_info": ...}`` as JupyterLab writes them once kernel ``kernel_name`` starts,
    or None when that cannot be known without starting it (no such kernel, not ipykernel, no answer)."""
    if spec_manager is None:
        from jupyter_client.kernelspec import KernelSpecManager

        spec_manager = KernelSpecManager()
    try:
        spec = spec_manager.get_kernel_spec(kernel_name)
    except Exception:  # noqa: BLE001 (jupyter_client's NoSuchKernel, or a broken kernel.json)
        return None
    argv = list(getattr(spec, "argv", None) or [])
    if not argv or not any("ipykernel" in part for part in argv):
        return None  # another kernel's language_info is known only to itself
    try:
        done = subprocess.run([_interpreter(argv), "-c", LANGUAGE_INFO_QUERY], capture_output=True, text=True,
                              timeout=QUERY_TIMEOUT_S)  # fmt: skip
        info = json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else None
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        info = None
    if not isinstance(info, dict) or not isinstance(info.get("version"), str):
        return None
    kernelspec = {"name": kernel_name, "display_name": spec.display_name, "language": spec.language}
    return {"kernelspec": kernelspec, "language_info": info}


def is_released_lab(metadata: dict, kernel: dict) -> bool:
    """Whether ``metadata`` is a released lab's, for ``kernel`` (``kernel_metadata``): ``dfa`` metadata, the same
    kernel name, and ``language_info`` that is the kernel's without its version (so nobody has saved it)."""
    released = {k: v for k, v in kernel["language_info"].items() if k != "version"}
    return (
        isinstance(metadata.get(LAB_KEY), dict)
        and (metadata.get("kernelspec") or {}).get("name") == kernel["kernelspec"]["name"]
        and metadata.get("language_info") == released
    )


def with_kernel_metadata(content: dict, kernel: dict | None) -> bool:
    """Put into a released lab's ``content`` (a notebook, changed in place) the kernelspec and language_info
    ``kernel`` will report; whether it did. Anything else is left as it is."""
    metadata = content.get("metadata") if isinstance(content, dict) else None
    if not kernel or not isinstance(metadata, dict) or not is_released_lab(metadata, kernel):
        return False
    metadata["kernelspec"] = copy.deepcopy(kernel["kernelspec"])
    metadata["language_info"] = copy.deepcopy(kernel["language_info"])
    return True


def lab_command(path: Path, jupyter_args: list[str]) -> list[str]:
    """The command ``dfa lab`` runs: this interpreter's JupyterLab with the contents manager above."""
    return [sys.executable, "-m", "jupyterlab", f"--ServerApp.contents_manager_class={CONTENTS_MANAGER}",
            str(path), *jupyter_args]  # fmt: skip


def add_commands(sub) -> None:
    p = sub.add_parser("lab", help="open the labs in JupyterLab; an unedited lab opens unmodified (the lab extra)")
    p.add_argument("path", nargs="?", default=".", help="a lab's .ipynb, or a folder to browse (default: here)")
    p.add_argument("jupyter_args", nargs=argparse.REMAINDER, metavar="-- ARGS",
                   help="further arguments for jupyter lab, after --, e.g. -- --port 8890 --no-browser")  # fmt: skip
    p.set_defaults(func=cmd_lab)


def cmd_lab(args: argparse.Namespace) -> int:
    extra = [a for a in args.jupyter_args or [] if a != "--"]
    if args.path.startswith("-"):  # `dfa lab -- --no-browser`: no PATH, the first argument is jupyter's
        args.path, extra = ".", [args.path, *extra]
    path = Path(args.path).expanduser()
    if not path.exists():
        raise DFAError(f"no notebook or folder {args.path!r}: give a lab's .ipynb (e.g. "
                       "course1_landscape/release/lab1_landscape/lab1_landscape.ipynb) or a folder")  # fmt: skip
    if path.is_file() and path.suffix != ".ipynb":
        raise DFAError(f"{args.path!r} is not a notebook: give a lab's .ipynb or a folder")
    missing = [m for m in ("jupyterlab", "jupyter_server", "ipykernel") if importlib.util.find_spec(m) is None]
    if missing:
        raise DFAError(f"dfa lab needs JupyterLab ({', '.join(missing)} not installed in {sys.executable}): "
                       f"{INSTALL_HINT}")  # fmt: skip
    command = lab_command(path, extra)
    print(f"dfa lab: {' '.join(command[2:4])} {path} (an unedited lab opens unmodified)", flush=True)
    if os.name == "posix":
        os.execv(command[0], command)  # JupyterLab takes this process over: Ctrl-C reaches it alone
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # elsewhere JupyterLab answers Ctrl-C; this one waits for it
    return subprocess.call(command)
