"""Reference measurements of the labs' GPU cells, for learners without a GPU.

``common/measure/reference_data/<name>.json`` files are written by ``benchmarks/reference/record.py`` on a real machine
(a GPU, or a CPU for its CPU rows): GEMM, softmax, SDPA and small-LLM timings, a torch.profiler summary, memory
peaks and roofline peaks, each file naming the machine, torch, the date and the load. Nothing in them is
simulated or typed in. ``load("t4")`` returns them as DataFrames with that provenance; ``vs_simulated``
sets the simulator's prediction for the same ops beside them.

    ref = reference.load("t4")          # or a CPU reference: reference.available() lists them
    ref.timings                         # one row per workload: median_s, FLOP/s, bytes/s, ...
    ref.vs_simulated()                  # measured (Tesla T4, reference) | simulated (t4) | sim/measured
    plot_roofline(ref.roofline(), ...)  # the measured roofline of that machine

The files ship inside the package (``common/measure/reference_data``, package data: a Colab ``pip install`` has
them), or come from where ``$DFA_REFERENCE_DIR`` points.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType, SimpleNamespace

import pandas as pd

from common.errors import DFAError

__all__ = ["Reference", "available", "load", "reference_dir"]

TABLES = ("timings", "profile", "memory", "peaks")
RECORD = "python benchmarks/reference/record.py"


def reference_dir() -> Path:
    """``$DFA_REFERENCE_DIR``, else the package's own ``common/measure/reference_data`` (installed with it)."""
    env = os.environ.get("DFA_REFERENCE_DIR")
    folder = Path(env) if env else Path(__file__).resolve().parent / "reference_data"
    if not folder.is_dir():
        raise DFAError(f"no reference folder at {str(folder)!r}: set DFA_REFERENCE_DIR to a folder of recorded "
                       f"runs ({RECORD} writes them)")
    return folder


def _read(path: Path) -> dict:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DFAError(f"cannot read reference file {str(path)!r}: {exc}") from None
    if not isinstance(doc, dict) or "provenance" not in doc or not set(TABLES) <= set(doc):
        raise DFAError(f"{str(path)!r} is not a reference file (needs provenance and {', '.join(TABLES)})")
    return doc


def _gpu_rows(path: Path) -> bool:
    try:
        return bool(_read(path)["provenance"].get("gpu_rows"))
    except DFAError:  # a broken file says so when it is loaded, not when another name is missing
        return False


def available() -> pd.DataFrame:
    """One row per reference file: name, device, chip, torch, date, load, whether it holds GPU rows."""
    rows = []
    for path in sorted(reference_dir().glob("*.json")):
        p = _read(path)["provenance"]
        rows.append({"name": path.stem, "device_name": p.get("device_name"), "device_type": p.get("device_type"),
                     "chip": p.get("chip"), "torch": p.get("torch"), "date_utc": p.get("date_utc"),
                     "load_avg_before": p.get("load_avg_before"), "gpu_rows": bool(p.get("gpu_rows")),
                     "quick": bool(p.get("quick"))})
    return pd.DataFrame(rows, columns=["name", "device_name", "device_type", "chip", "torch", "date_utc",
                                       "load_avg_before", "gpu_rows", "quick"])


def load(name: str | os.PathLike) -> Reference:
    """A reference by name ('t4', 'cpu-amd-epyc'; a catalog alias such as 'Tesla-T4' works) or by file path."""
    path = Path(name)
    if not (path.suffix == ".json" and path.is_file()):
        folder = reference_dir()
        names = sorted(p.stem for p in folder.glob("*.json"))
        key = str(name).lower().strip()
        try:  # a chip alias names its catalog record: 'tesla-t4' -> 't4'
            from common.chips import get_chip
            key = get_chip(key).name
        except DFAError:
            pass
        path = folder / f"{key}.json"
        if not path.is_file():
            gpu = any(_gpu_rows(folder / f"{n}.json") for n in names)
            hint = "" if gpu else f"; no GPU reference has been recorded yet (run {RECORD} on a CUDA machine)"
            raise DFAError(f"no reference measurements {str(name)!r}; recorded: {', '.join(names) or 'none'}{hint}")
    doc = _read(path)
    prov = MappingProxyType(dict(doc["provenance"]))
    frames = {}
    for t in TABLES:
        df = pd.DataFrame(doc[t])
        df.attrs["provenance"] = dict(prov)
        frames[t] = df
    return Reference(path.stem, prov, **frames)


@dataclass(frozen=True)
class Reference:
    """One recorded run: four tables and where, when and on what they were measured."""

    name: str
    provenance: MappingProxyType
    timings: pd.DataFrame
    profile: pd.DataFrame
    memory: pd.DataFrame
    peaks: pd.DataFrame

    @property
    def label(self) -> str:
        """'Tesla T4 (cuda), torch 2.8.0+cu126, 2026-12-05, load 0.4': say this next to any number shown."""
        p = self.provenance
        load = p.get("load_avg_before")
        return (f"{p['device_name']} ({p['device_type']}), torch {p['torch']}, {str(p['date_utc'])[:10]}"
                + (f", load {load[0]}" if load else "") + (" [quick run: not a reference]" if p.get("quick") else ""))

    def roofline(self):
        """The measured roofline of the reference machine: fp32 GEMM and copy peaks, plus each 16-bit GEMM
        recorded (the fastest dtype is the roof, ``roofline.with_measured_gemms``)."""
        from common.measure import bench
        from common.roofline import roofline_from_measured, with_measured_gemms

        pk = self.peaks.set_index(["dtype", "what"])
        gemm, copy = pk.loc[("fp32", "gemm")], pk.loc[("fp32", "copy")]
        p = self.provenance
        peaks = bench.MeasuredPeaks(device=p["device"], device_name=p["device_name"], dtype="float32",
                                    flops_per_s=float(gemm["flops_per_s"]), bytes_per_s=float(copy["bytes_per_s"]),
                                    gemm_n=int(gemm["gemm_n"]), copy_bytes=int(copy["copy_bytes"]), gemm=None,
                                    copy=None)
        rl = roofline_from_measured(peaks, name=f"{p['device_name']} (reference)")
        extra = {}
        for (d, what), row in pk.iterrows():
            if what == "gemm" and d != "fp32":
                skipped = row.get("skipped")
                extra[d] = skipped if isinstance(skipped, str) else \
                    SimpleNamespace(flops_per_s=float(row["flops_per_s"]), sub_label=f"gemm N={int(row['gemm_n'])}")
        rl = with_measured_gemms(rl, extra) if extra else rl
        return replace(rl, note=f"{rl.note}; reference: {self.label}")

    def vs_simulated(self, chip=None, *, backend: str = "gpu", dtype: str | None = None) -> pd.DataFrame:
        """Measured (this reference) vs simulated (``chip``, default the reference's own catalog chip) for every
        timed op the simulator models, in the dtype it was measured in (rows the chip has no datapath for, and
        rows with no measured time - a decode step the recording could not resolve - are left out, and listed in
        ``attrs['skipped']``). Columns as ``common.measure.devices.sim_vs_measured``."""
        from common.chips import get_chip
        from common.measure.devices import sim_vs_measured
        from common.sim import simulate_llm, simulate_op

        name = chip or self.provenance.get("chip")
        if name is None:
            raise DFAError(f"reference {self.name!r} was measured on {self.provenance['device_name']!r}, which no "
                           "catalog chip stands for: name the chip to simulate, e.g. vs_simulated('t4')")
        c = get_chip(name)
        rows = self.timings if dtype is None else self.timings[self.timings["dtype"] == dtype]
        measured, simulated, skipped = {}, {}, []
        for r in rows.itertuples():
            op, model = getattr(r, "sim_op", None), getattr(r, "sim_model", None)
            if not isinstance(op, str) and not isinstance(model, str):
                continue
            if not c.supports(r.dtype) or not (r.median_s > 0 and math.isfinite(r.median_s)):
                skipped.append(r.workload)  # no datapath on the chip, or no time measured (an unresolved step)
                continue
            if isinstance(op, str):
                rep = simulate_op(op, tuple(r.sim_shape), backend, chip=c.name, dtype=r.dtype)
            else:
                layers = getattr(r, "sim_layers", None)
                if pd.notna(layers):  # a cut of the model (None / NaN: the whole model)
                    from common.models import get_config
                    model = replace(get_config(model), n_layers=int(layers))
                rep = simulate_llm(model, backend, phase=r.phase, batch=int(r.batch), seq=int(r.seq), chip=c.name,
                                   dtype=r.dtype)
            measured[r.workload], simulated[r.workload] = r.median_s, rep.time_s
        if not measured:
            raise DFAError(f"reference {self.name!r} has no timed op that {c.name} can simulate"
                           + (f" in {dtype}" if dtype else ""))
        out = sim_vs_measured(measured, simulated, chip=c, measured_on=f"{self.provenance['device_name']}, "
                                                                       "reference")
        out.attrs.update(skipped=skipped, provenance=dict(self.provenance))
        return out
