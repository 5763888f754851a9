"""The accelerator landscape map (Figure 1 of the specialization): one table that all six courses add rows to.

Rows are (system, attribute) cells, each with the course that added it and where its value came from::

    from common.landscape import LandscapeMap, SYSTEMS
    lm = LandscapeMap.load()            # the one map of all six courses (default_path(): $DFA_LANDSCAPE, else
                                        # $XDG_DATA_HOME/dataflow-labs/landscape_map.json)
    lm.add("GPU", "execution model", "SIMT kernels launched by a host", course=1, source="learner")
    lm.add("GPU", "decode latency (tiny-block)", 1.9e-4, course=1, source="simulated")
    lm.save()
    lm.frame()                          # index attribute, columns SYSTEMS, cell = value
    lm.render()                         # a table figure, grouped by course, cells tagged by source

Nothing a learner has is lost without asking: adding a *different* value for an existing (system, attribute)
raises a ``DFAError`` unless ``overwrite=True``; adding the same value again changes nothing. ``save`` writes
a temporary file next to the map and renames it over the old one, so an interrupted save never leaves half a
file. A lab that re-measures its own rows passes ``overwrite=True`` on purpose; ``merge`` copies another map's
rows in and never replaces a row of the learner's.

Every lab opens the same file (``common.landscape.store.open_map``), rebuilding the catalog and simulator rows
of earlier courses that it lacks (``common.landscape.courses``); ``keep_on_drive``, ``upload_map`` and
``download_map`` keep it across Colab sessions (they are importable from here too).

Also here, for Course 1: ``tensor_core_terms`` reads the tensor-core count and FMA rate per clock of a GPU
from its catalog record, so a learner can rebuild the datasheet peak (SMs x tensor cores x clock).
"""
from __future__ import annotations

import json
import math
import numbers
import os
import re
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import pandas as pd

from common.errors import DFAError, unknown
from common.palette import SEQUENCE, tint

__all__ = ["COURSES", "DEFAULT_FILE", "ENV_VAR", "SOURCES", "SYSTEMS", "SYSTEM_OF_BACKEND", "LandscapeMap",
           "data_dir", "dominant_operator", "format_value", "system_name", "tensor_core_terms"]

SYSTEMS = ("GPU", "TPU", "WSE", "LPU", "Spyre")
SOURCES = ("measured", "simulated", "catalog", "learner")
SYSTEM_OF_BACKEND = {"gpu": "GPU", "tpu": "TPU", "wse": "WSE", "lpu": "LPU", "spyre": "Spyre"}
COURSES = {1: "Accelerator landscape", 2: "Dataflow execution models", 3: "Dataflow compilation",
           4: "Memory systems", 5: "Debugging across dataflow stacks", 6: "Performance modelling"}
ENV_VAR = "DFA_LANDSCAPE"
DEFAULT_FILE = "landscape_map.json"
APP_DIR = "dataflow-labs"
FORMAT_VERSION = 1


def data_dir() -> Path:
    """Where the project keeps a learner's data: ``$XDG_DATA_HOME/dataflow-labs``, else
    ``~/.local/share/dataflow-labs`` (the XDG layout; the capture cache sits beside it under ~/.cache)."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / APP_DIR

# How a cell is tagged in the figure: a short mark after the value and a background colour.
SOURCE_STYLE = {"measured": ("[M]", tint(SEQUENCE[2], 0.18)), "simulated": ("[S]", tint(SEQUENCE[0], 0.15)),
                "catalog": ("[C]", "#eeeeee"), "learner": ("[L]", tint(SEQUENCE[1], 0.2))}  # the mark says it too
_ALIASES = {s.lower(): s for s in SYSTEMS} | {"cerebras": "WSE", "groq": "LPU", "ibm": "Spyre"}


def system_name(system: str) -> str:
    """'gpu', 'dfa_gpu', 'GPU' -> 'GPU'; anything else is a DFAError listing the five systems."""
    key = str(system).strip().lower().removeprefix("dfa_") if isinstance(system, str) else None
    if key not in _ALIASES:
        raise DFAError(f"unknown system {system!r}; valid: {', '.join(SYSTEMS)}")
    return _ALIASES[key]


def _check_value(value: Any) -> Any:
    if isinstance(value, bool) or value is None:
        raise DFAError(f"a landscape value must be a string or a finite number, got {value!r}")
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise DFAError(f"a landscape value must be a string or a finite number, got {value!r}") from None
        if not math.isfinite(number):
            raise DFAError(f"a landscape value must be finite, got {value!r}")
        return number
    if isinstance(value, str):
        if not value.strip():
            raise DFAError("a landscape value must not be an empty string")
        return value.strip()
    raise DFAError(f"a landscape value must be a string or a finite number, got {type(value).__name__}")


def format_value(value: Any, digits: int = 3) -> str:
    """A cell as text: numbers with ``digits`` significant digits and an SI prefix (1.9e-4 -> '190 µ')."""
    if isinstance(value, str):
        return value
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    v = float(value)
    if v == 0:
        return "0"
    if isinstance(value, int) and abs(value) < 10_000:
        return str(value)
    prefixes = [(1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1, ""), (1e-3, "m"), (1e-6, "µ"),
                (1e-9, "n")]
    for scale, prefix in prefixes:
        if abs(v) >= scale:
            return f"{v / scale:.{digits}g} {prefix}".rstrip()
    return f"{v:.{digits}g}"


class LandscapeMap:
    """The map: an ordered list of rows ``{system, attribute, value, course, source}``, at most one per
    (system, attribute). ``load``/``save`` read and write it as JSON at ``path``."""

    def __init__(self, path: str | os.PathLike | None = None, rows: list[dict] | None = None):
        self.path = Path(path) if path is not None else self.default_path()
        self._rows: list[dict] = []
        for row in rows or []:
            self._insert(self._validated(row["system"], row["attribute"], row["value"], row["course"],
                                         row["source"]))

    # ---- files ------------------------------------------------------------------------------------------
    @staticmethod
    def default_path() -> Path:
        """``$DFA_LANDSCAPE`` if set, else ``data_dir() / landscape_map.json``: one file that every lab of every
        course reads and extends, wherever the notebook lives."""
        return Path(os.environ.get(ENV_VAR) or data_dir() / DEFAULT_FILE)

    @classmethod
    def load(cls, path: str | os.PathLike | None = None) -> LandscapeMap:
        """The map saved at ``path`` (default: ``default_path()``); an empty map if there is no file yet.

        A file that is not a landscape map is an error (never silently replaced by an empty map)."""
        target = Path(path) if path is not None else cls.default_path()
        if not target.exists():
            return cls(target)
        try:
            doc = json.loads(target.read_text(encoding="utf-8"))
            rows = doc["rows"]
            if not isinstance(rows, list):
                raise TypeError("rows is not a list")
            return cls(target, rows)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            if isinstance(exc, DFAError):
                raise DFAError(f"{target} holds an invalid landscape row: {exc}") from None
            raise DFAError(f"{target} is not a landscape map ({type(exc).__name__}: {exc}); move it away or pass "
                           f"another path") from None

    def save(self, path: str | os.PathLike | None = None) -> Path:
        """Write the map as JSON, atomically (temporary file in the same folder, then ``os.replace``)."""
        target = Path(path) if path is not None else self.path
        target.parent.mkdir(parents=True, exist_ok=True)
        doc = {"version": FORMAT_VERSION, "systems": list(SYSTEMS), "rows": self.rows}
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(doc, fh, indent=1, ensure_ascii=False)
                fh.write("\n")
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, target)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        return target

    # ---- rows -------------------------------------------------------------------------------------------
    @staticmethod
    def _validated(system, attribute, value, course, source) -> dict:
        sys_ = system_name(system)
        if not isinstance(attribute, str) or not attribute.strip():
            raise DFAError(f"attribute must be a non-empty string, got {attribute!r}")
        if isinstance(course, bool) or not isinstance(course, int) or course not in COURSES:
            raise DFAError(f"course must be one of {', '.join(map(str, COURSES))}, got {course!r}")
        if source not in SOURCES:
            raise unknown("source", source, SOURCES)
        return {"system": sys_, "attribute": attribute.strip(), "value": _check_value(value), "course": course,
                "source": source}

    def _find(self, system: str, attribute: str) -> int | None:
        return next((i for i, r in enumerate(self._rows)
                     if r["system"] == system and r["attribute"] == attribute), None)

    def _insert(self, row: dict) -> None:
        i = self._find(row["system"], row["attribute"])
        if i is None:
            self._rows.append(row)
        else:
            self._rows[i] = row

    def add(self, system: str, attribute: str, value, *, course: int, source: str, overwrite: bool = False) -> bool:
        """Set one cell. Returns True when the map changed.

        ``source``: measured | simulated | catalog | learner. A different value for a cell that exists needs
        ``overwrite=True`` (a ``DFAError`` otherwise, naming both values); the same value is a no-op."""
        row = self._validated(system, attribute, value, course, source)
        i = self._find(row["system"], row["attribute"])
        if i is not None:
            old = self._rows[i]
            if old["value"] == row["value"] and type(old["value"]) is type(row["value"]):
                return False
            if not overwrite:
                raise DFAError(f"{row['system']} / {row['attribute']!r} already holds {old['value']!r} "
                               f"({old['source']}, course {old['course']}); pass overwrite=True to replace it "
                               f"with {row['value']!r}")
            self._rows[i] = row
            return True
        self._rows.append(row)
        return True

    def get(self, system: str, attribute: str, default=None):
        """The value of one cell, or ``default``."""
        i = self._find(system_name(system), attribute)
        return default if i is None else self._rows[i]["value"]

    def remove(self, system: str, attribute: str) -> bool:
        """Delete one cell (an explicit request); returns whether it existed."""
        i = self._find(system_name(system), attribute)
        if i is None:
            return False
        del self._rows[i]
        return True

    def merge(self, other: LandscapeMap) -> tuple[int, list[str]]:
        """Copy ``other``'s rows into this map; returns (cells added or replaced, conflicts kept as they are).

        A cell only ``other`` has is added. Where both have a cell with different values, this map's is kept,
        except that a learner's row replaces a rebuilt one (catalog or simulated): nothing the learner wrote
        is ever replaced, and each such conflict is named in the list."""
        changed, conflicts = 0, []
        for row in other.rows:
            i = self._find(row["system"], row["attribute"])
            if i is None:
                self._rows.append(row)
                changed += 1
                continue
            mine = self._rows[i]
            if mine["value"] == row["value"] and type(mine["value"]) is type(row["value"]):
                continue
            if row["source"] == "learner" and mine["source"] in ("catalog", "simulated"):
                self._rows[i] = row
                changed += 1
            else:
                conflicts.append(f"{row['system']} / {row['attribute']!r}: kept {mine['value']!r}, not "
                                 f"{row['value']!r}")
        return changed, conflicts

    @property
    def rows(self) -> list[dict]:
        """Copies of the rows, in the order they were added."""
        return [dict(r) for r in self._rows]

    def __len__(self) -> int:
        return len(self._rows)

    def attributes(self) -> list[tuple[int, str]]:
        """(course, attribute) in display order: by the first course that added the attribute, then first seen."""
        first: dict[str, tuple[int, int]] = {}
        for n, r in enumerate(self._rows):
            course, pos = first.get(r["attribute"], (r["course"], n))
            first[r["attribute"]] = (min(course, r["course"]), pos)
        return [(c, a) for a, (c, _) in sorted(first.items(), key=lambda kv: kv[1])]

    def frame(self, *, sources: bool = False) -> pd.DataFrame:
        """Index attribute, columns SYSTEMS, cell = value (NaN where empty); with ``sources`` the cells are
        the sources instead. ``attrs['course']`` maps each attribute to its course."""
        order = self.attributes()
        df = pd.DataFrame(None, index=pd.Index([a for _, a in order], name="attribute"), columns=list(SYSTEMS),
                          dtype=object)
        for r in self._rows:
            df.at[r["attribute"], r["system"]] = r["source"] if sources else r["value"]
        df.attrs["course"] = {a: c for c, a in order}
        return df

    # ---- the figure -------------------------------------------------------------------------------------
    def render(self, ax=None, title: str | None = None, *, width: int = 24):
        """Draw the map as a table figure: one band per course, one row per attribute, one column per system;
        each cell shows its value and a source tag ([M] measured, [S] simulated, [C] catalog, [L] learner),
        and is shaded by source. Returns the Axes."""
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch

        order = self.attributes()
        cells = {(r["attribute"], r["system"]): r for r in self._rows}
        lines: list[tuple[str, list[str], list[str], int]] = []  # (kind, texts, colours, height in lines)
        course_now = None
        for course, attribute in order:
            if course != course_now:
                course_now = course
                name = textwrap.wrap(COURSES[course], width)  # one column wide: long names take two lines
                band = [f"Course {course}", "\n".join(name), "", "", "", ""]
                lines.append(("band", band, ["#444444"] * (1 + len(SYSTEMS)), len(name)))
            texts, colours = ["\n".join(textwrap.wrap(attribute, 22)) or attribute], ["#ffffff"]
            for system in SYSTEMS:
                row = cells.get((attribute, system))
                if row is None:
                    texts.append("—")
                    colours.append("#ffffff")
                    continue
                mark, colour = SOURCE_STYLE[row["source"]]
                body = format_value(row["value"])
                wrapped = textwrap.wrap(body, width) or [body]
                wrapped[-1] = f"{wrapped[-1]} {mark}"
                texts.append("\n".join(wrapped[:4]) + ("…" if len(wrapped) > 4 else ""))
                colours.append(colour)
            height = max(t.count("\n") + 1 for t in texts)
            lines.append(("row", texts, colours, height))
        n_lines = sum(h + 0.35 for *_, h in lines) + 1.2
        if ax is None:
            _, ax = plt.subplots(figsize=(16, max(2.2, 0.22 * n_lines + 1.2)))
        ax.set_axis_off()
        if not lines:
            ax.text(0.5, 0.5, "The landscape map is empty: add rows with LandscapeMap.add(...)", ha="center",
                    va="center", fontsize=11, transform=ax.transAxes)
            ax.set_title(title or "Accelerator landscape map", fontsize=12)
            return ax
        table = ax.table(cellText=[t for _, t, _, _ in lines], cellColours=[c for _, _, c, _ in lines],
                         colLabels=["attribute", *SYSTEMS], colColours=["#dddddd"] * (1 + len(SYSTEMS)),
                         colWidths=[0.16] + [0.168] * len(SYSTEMS), cellLoc="left", loc="upper center")
        table.auto_set_font_size(False)
        table.set_fontsize(7.5)
        unit = 1.0 / n_lines
        for (r, _c), cell in table.get_celld().items():
            if r == 0:
                cell.set_height(unit * 1.2)
                cell.get_text().set_fontweight("bold")
                continue
            kind, _, _, h = lines[r - 1]
            cell.set_height(unit * (h + 0.35))
            cell.set_edgecolor("#bbbbbb")
            if kind == "band":
                cell.set_edgecolor("#444444")
                cell.get_text().set_color("white")
                cell.get_text().set_fontweight("bold")
        handles = [Patch(facecolor=colour, edgecolor="#999999", label=f"{mark} {name}")
                   for name, (mark, colour) in SOURCE_STYLE.items()]
        ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.015), ncol=4, fontsize=8,
                  frameon=False, title="cell source")
        used = sorted({r["source"] for r in self._rows})
        ax.set_title(title or f"Accelerator landscape map — {len(self._rows)} cells ({', '.join(used)})",
                     fontsize=12)
        return ax

    def export(self, folder: str | os.PathLike, name: str = "landscape_map", *, title: str | None = None
               ) -> tuple[Path, Path]:
        """Write the whole map as ``<name>.png`` (the figure of ``render``) and ``<name>.csv`` (one line per
        cell: course, attribute, system, value, source) into ``folder``; returns both paths."""
        import matplotlib.pyplot as plt

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        png, csv = folder / f"{name}.png", folder / f"{name}.csv"
        rank = {"attribute": {a: n for n, (_, a) in enumerate(self.attributes())},
                "system": {s: n for n, s in enumerate(SYSTEMS)}}  # the figure's order, not the alphabet's
        table = pd.DataFrame(self.rows, columns=["course", "attribute", "system", "value", "source"])
        table = table.sort_values(["course", "attribute", "system"], kind="stable",
                                  key=lambda col: col.map(rank[col.name]) if col.name in rank else col)
        table.to_csv(csv, index=False)
        ax = self.render(title=title)
        ax.figure.savefig(png, dpi=150, bbox_inches="tight")
        plt.close(ax.figure)
        return png, csv

    def __repr__(self) -> str:
        return f"LandscapeMap({str(self.path)!r}, {len(self._rows)} cells)"


# ---- Course 1: the GPU's compute term from its parts ---------------------------------------------------------
_TC = re.compile(r"(\d[\d,]*)\s+(?:[\w-]+\s+)*?tensor cores", re.IGNORECASE)
_FMA_DIMS = re.compile(r"(\d+)x(\d+)x(\d+)\s+\w+\s+FMA per clock", re.IGNORECASE)
_FMA_N = re.compile(r"(\d[\d,]*)\s+\w+\s+FMA per clock", re.IGNORECASE)


def tensor_core_terms(chip) -> dict:
    """The parts of a GPU's tensor-core peak, read from its catalog record: SMs, tensor cores, FMA per clock
    per tensor core (16-bit inputs), clock, and the peak they multiply to, 2 x tensor cores x FMA x clock.

    Numbers come only from the catalog (``compute_units``, ``clock_hz``, and the ``matrix_unit`` text that
    states the tensor-core count and FMA rate, e.g. '528 4th-gen tensor cores, 512 fp16 FMA per clock each').
    """
    from common.chips import get_chip

    c = get_chip(chip)
    if c.kind != "gpu":
        raise DFAError(f"tensor_core_terms needs a GPU record; {c.name} is a {c.kind}")
    tc = _TC.search(c.matrix_unit)
    dims = _FMA_DIMS.search(c.matrix_unit)
    fma = math.prod(int(d) for d in dims.groups()) if dims else None
    if fma is None:
        n = _FMA_N.search(c.matrix_unit)
        fma = int(n.group(1).replace(",", "")) if n else None
    if tc is None or fma is None or not c.clock_hz:
        raise DFAError(f"the catalog record of {c.name} does not state its tensor cores and FMA rate "
                       f"({c.matrix_unit!r})")
    tensor_cores = int(tc.group(1).replace(",", ""))
    derived = 2.0 * tensor_cores * fma * c.clock_hz
    return {"chip": c.name, "sms": c.compute_units, "tensor_cores": tensor_cores,
            "tensor_cores_per_sm": tensor_cores // c.compute_units, "fma_per_clock_per_tc": fma,
            "clock_hz": c.clock_hz, "derived_peak_flops": derived, "catalog_peak_fp16": c.peak_flops.get("fp16")}


_MATMULS = ("aten.mm", "aten.bmm", "aten.addmm", "aten.matmul", "aten.linear", "aten.baddbmm")


def dominant_operator(report) -> tuple[str, float]:
    """(operator, share of the busy time) that a simulated ``Report`` spends most compute time on.

    Each compute event on the critical engine counts for its main op (the matmul in a fused kernel, else its
    first op, from ``event.detail['ops']``); share = that op's seconds / all compute seconds on that engine."""
    seconds: dict[str, float] = {}
    for e in report.events:
        if e.kind != "compute" or e.engine != report.critical_engine:
            continue
        ops = list(e.detail.get("ops") or [e.name])
        main = next((o for o in ops if o in _MATMULS), ops[0])
        seconds[main] = seconds.get(main, 0.0) + e.duration
    total = sum(seconds.values())
    if not total:
        raise DFAError(f"the {report.backend} report has no compute events on {report.critical_engine}")
    op = max(seconds, key=seconds.get)
    return op, seconds[op] / total
