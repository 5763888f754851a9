"""Where a learner's landscape map lives, and how a lab opens it.

One map for the whole specialization: every lab opens ``LandscapeMap.default_path()`` (``$DFA_LANDSCAPE``, else
``~/.local/share/dataflow-labs/landscape_map.json``), so Lab 5 sees what Labs 1 to 4 added::

    from common.landscape import open_map
    lm = open_map(5)            # the map, with the rebuildable rows of Courses 1-4 it lacked added back

On Colab the home folder is wiped when the session ends. Two opt-in ways to keep the map, each a no-op (one
printed line) anywhere else:

- ``keep_on_drive()``: mount Google Drive (Colab asks for permission) and keep the map there from now on;
- ``download_map()`` at the end of a lab, ``upload_map()`` at the start of the next one.

Nothing here replaces a learner's row: a map brought in from elsewhere (an old ``./landscape_map.json`` next to
the notebook, an upload, the copy on Drive) is merged with ``LandscapeMap.merge``, which keeps them.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from common.landscape.map import DEFAULT_FILE, ENV_VAR, LandscapeMap

DRIVE_MOUNT = "/content/drive"
PREDICTIONS_FILE = "landscape_predictions.json"  # common.explore.predict keeps a learner's predictions here
DRIVE_FOLDER = "MyDrive/dataflow-labs"


def on_colab() -> bool:
    return "google.colab" in sys.modules


def _merge_into(lm: LandscapeMap, other_path: Path, what: str) -> int:
    """Merge the map at ``other_path`` into ``lm`` (lm's rows kept); print one line if anything happened."""
    other = LandscapeMap.load(other_path)
    added, conflicts = lm.merge(other)
    if added or conflicts:
        print(f"{what} {other_path}: {added} cells merged in"
              + (f"; {len(conflicts)} differ and were kept as the map has them (e.g. {conflicts[0]})"
                 if conflicts else ""))
    return added


def open_map(course: int, path: str | os.PathLike | None = None, *, scratch: bool = False) -> LandscapeMap:
    """The learner's map as a lab of ``course`` starts its landscape section.

    ``path`` None: the shared map (``default_path()``); a ``landscape_map.json`` that an older release left in
    the working folder is merged in (its rows kept, the file left as it is). Then the rebuildable rows of
    Courses 1 to ``course - 1`` that the map lacks are computed and added (``common.landscape.courses``), so a
    lab never starts from an empty map. ``scratch`` (CI and the autograder: a lab's FAST setting): ``path`` or a
    new temporary file, nothing merged or rebuilt, so grading never touches a learner's map and costs no
    simulation it does not grade. Saving is the lab's call (``lm.save()``)."""
    from common.landscape.courses import rebuild as rebuild_rows

    if scratch:
        import tempfile

        return LandscapeMap.load(path or Path(tempfile.mkdtemp(prefix="dfa_")) / DEFAULT_FILE)
    lm = LandscapeMap.load(path)
    legacy = Path(DEFAULT_FILE)
    if path is None and legacy.is_file() and legacy.resolve() != lm.path.resolve():
        _merge_into(lm, legacy, "an earlier map in this folder,")
    added = rebuild_rows(lm, range(1, course))
    if added:
        print("rebuilt the catalog and simulator rows this map lacked: "
              + ", ".join(f"Course {c}: {n} cells" for c, n in added.items())
              + " (rows you wrote yourself cannot be rebuilt: they stay where you saved them)")
    print(f"the landscape map: {lm.path} ({len(lm)} cells)")
    return lm


def keep_on_drive(folder: str = DRIVE_FOLDER) -> Path | None:
    """On Colab: mount Google Drive, merge the session's map into ``MyDrive/dataflow-labs/landscape_map.json``
    (Drive's rows kept) and point ``$DFA_LANDSCAPE`` at it for this session. Elsewhere: print where the map
    is kept and return None (nothing to do: the file outlives the session)."""
    if not on_colab():
        print(f"not on Colab: your landscape map is kept at {LandscapeMap.default_path()} (nothing to do)")
        return None
    from google.colab import drive

    drive.mount(DRIVE_MOUNT)
    target = Path(DRIVE_MOUNT) / folder / DEFAULT_FILE
    here = LandscapeMap.default_path()
    kept = LandscapeMap.load(target)
    if here.is_file() and here.resolve() != target.resolve():
        _merge_into(kept, here, "this session's map")
    kept.save()
    os.environ[ENV_VAR] = str(target)
    print(f"your landscape map is kept on Google Drive: {target} ({len(kept)} cells)")
    return target


def download_map(*extra: str | os.PathLike) -> Path:
    """On Colab: download the map, the predictions beside it (``PREDICTIONS_FILE``) and any ``extra`` files (e.g.
    the exported PNG and CSV) to your computer. Elsewhere: print where the map is and download nothing. Returns
    the map's path."""
    path = LandscapeMap.default_path()
    if not on_colab():
        print(f"not on Colab: nothing to download, your landscape map is kept at {path}")
        return path
    from google.colab import files

    for item in (path, path.with_name(PREDICTIONS_FILE), *extra):
        if Path(item).is_file():
            files.download(str(item))
    return path


def upload_map() -> LandscapeMap | None:
    """On Colab: ask for a ``landscape_map.json`` you downloaded earlier and merge it into this session's map
    (rows both have keep this session's values; a learner's row replaces a rebuilt one). Elsewhere: no-op."""
    if not on_colab():
        print(f"not on Colab: nothing to upload, your landscape map is kept at {LandscapeMap.default_path()}")
        return None
    import tempfile

    from google.colab import files

    lm = LandscapeMap.load()
    for name, data in files.upload().items():
        incoming = Path(tempfile.mkdtemp(prefix="dfa_upload_")) / Path(name).name
        incoming.write_bytes(data)
        _merge_into(lm, incoming, "uploaded")
    lm.save()
    print(f"the landscape map: {lm.path} ({len(lm)} cells)")
    return lm
