"""One page per simulated machine: what its compiler models, its chip records with their sources, and where
the fidelity results say it is wrong. Every number comes from ``common.chips`` or ``fidelity.json``."""

from __future__ import annotations

import math
import re
import sys

from common.chips import Chip, chips_of_kind
from common.palette import SEQUENCE

TITLES = {"gpu": "GPU", "tpu": "Google TPU", "wse": "Cerebras WSE", "lpu": "Groq LPU", "spyre": "IBM Spyre"}
# The fidelity goal's tighter mark (benchmarks/fidelity.py counts figures "within 1.4x" besides the 2x goal).
CLOSE = 1.4


def md_escape(text: str) -> str:
    """``text`` safe inside a Markdown table cell: punctuation Markdown would read is backslash-escaped."""
    return re.sub(r"([\\`*_\[\]<>|#$])", r"\\\1", " ".join(str(text).split()))


def si(value: float | None, unit: str) -> str:
    """3.12e14, 'FLOP/s' -> '312 TFLOP/s'; None -> 'not published'."""
    if value is None:
        return "not published"
    for factor, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.4g} {prefix}{unit}"
    return f"{value:.4g} {unit}"


def policy_doc(kind: str) -> str:
    """The docstring of the module that holds ``kind``'s policy class: what that simulated compiler does."""
    from common.sim import get_backend

    return (sys.modules[get_backend(kind).__module__].__doc__ or "").strip()


def chip_table(chip: Chip) -> list[str]:
    rows = [("vendor", chip.vendor), ("matrix unit", chip.matrix_unit),
            ("compute units", f"{chip.compute_units} {chip.compute_unit_name}"),
            ("clock", si(chip.clock_hz, "Hz"))]
    rows += [(f"dense {dtype} peak", si(flops, "OP/s" if dtype == "int8" else "FLOP/s"))  # int8: integer ops
             for dtype, flops in chip.peak_flops.items()]
    for level in chip.memory_levels:
        size = si(level.capacity, "B") + (f" x {level.count}" if level.count > 1 else "")
        rows.append((f"memory {level.name}", f"{size}, {si(level.bandwidth, 'B/s')}" +
                     (f" ({level.note})" if level.note else "")))
    rows += [("chip-to-chip link", f"{chip.link_name}: {si(chip.link_bandwidth, 'B/s')}"),
             ("power", si(chip.power_w, "W"))]
    rows += [(f"fact {name}", f"{value:g}") for name, value in chip.facts.items()]
    lines = ["| field | value |", "| --- | --- |"]
    return lines + [f"| {md_escape(k)} | {md_escape(v)} |" for k, v in rows]


def chip_section(chip: Chip) -> list[str]:
    aliases = f" (also: {md_escape(', '.join(chip.aliases))})" if chip.aliases else ""
    out = [f"### `{chip.name}`{aliases}", "", *chip_table(chip), "",
           f"Sources of `{chip.name}` (catalog field: where the number comes from):", "",
           "| field | source |", "| --- | --- |"]
    out += [f"| {md_escape(k)} | {md_escape(v)} |" for k, v in chip.sources.items()]
    if chip.estimates:
        out += ["", f"Estimates of `{chip.name}`: numbers the simulator needs that the vendor does not publish.", "",
                "| estimate | value | derivation |", "| --- | --- | --- |"]
        out += [f"| {md_escape(k)} | {md_escape(f'{e.value:.4g} {e.unit}')} | {md_escape(e.derivation)} |"
                for k, e in chip.estimates.items()]
    return [*out, ""]


def error_factor(ratio: float) -> float:
    """max(r, 1/r): how far a simulated / published ratio is from 1, either way."""
    return max(ratio, 1 / ratio)


def _band(row: dict) -> str:
    """Where a published figure falls against a band of upper bounds, and the cost a figure below it implies."""
    if "band" not in row:
        return ""
    # band is (slow, fast); band_chips is (fewest, largest deployment): the fewest chips, fewest hops a token, are fast
    (slow, fast), (fast_chips, slow_chips) = row["band"], row.get("band_chips", ("?", "?"))
    text = (f"; simulated band {slow:,.0f} ({slow_chips} chips) to {fast:,.0f} ({fast_chips} chips) "
            f"{md_escape(row['unit'])}, "
            f"published {row['published']:,} {'inside' if row.get('inside') else 'outside'} it")
    if row.get("implied_s"):
        text += f": implies at least {row['implied_s'] * 1e3:.2f} ms a token that the simulator does not charge"
    return text


def wrong_section(kind: str, fidelity: dict) -> list[str]:
    """Where the machine is known to be wrong: its fidelity figures, the worst first."""
    rows = [r for r in fidelity["rows"] if r["backend"] == kind]
    head = ["## Where it is known to be wrong", ""]
    if not rows:
        return [*head, f"No published end-to-end figure of the {TITLES[kind]} is in "
                "`benchmarks/results/fidelity.json`: this simulator is unchecked against measurements, "
                "and its numbers are the cost model's alone.", ""]
    sourced = sorted((r for r in rows if r["group"] == "sourced"), key=lambda r: -error_factor(r["ratio"]))
    bounds = [r for r in rows if r["group"] != "sourced"]
    out = list(head)
    if sourced:
        far = [r for r in sourced if error_factor(r["ratio"]) > CLOSE]
        worst = sourced[0]
        out += [f"{len(sourced)} sourced figure(s); the worst is {worst['ratio']:.2f}x "
                f"({'faster' if worst['ratio'] > 1 else 'slower'} than published), "
                f"{len(far)} of them off by more than {CLOSE}x. Above 1 the simulator is optimistic.", "",
                "| published figure | published | simulated | sim / published |", "| --- | --- | --- | --- |"]
        out += [f"| {md_escape(r['figure'])} | {r['published']:,} {md_escape(r['unit'])} | "
                f"{r['simulated']:,} {md_escape(r['unit'])} | {r['ratio']:.2f} |" for r in sourced]
        out.append("")
    if bounds:
        out += ["Figures it can only bound (a first-order cost is unpublished, so nothing is fitted to it):", ""]
        for r in bounds:
            unknowns = "; ".join(r.get("unknowns", []))
            out.append(f"- {md_escape(r['figure'])}: {r['check']}, gap {r['gap']:.2f}, "
                       f"{'holds' if r['holds'] else 'does NOT hold'}{_band(r)}. Unknown: {md_escape(unknowns)}.")
        out.append("")
    return out


def machine_page(kind: str, fidelity: dict) -> str:
    doc = policy_doc(kind)
    summary, _, detail = doc.partition("\n")
    chips = chips_of_kind(kind)
    out = [f"# {TITLES[kind]} (simulated, backend `{kind}`)", "", "## What it models", "", md_escape(summary), ""]
    if detail.strip():
        out += ["The policy module's own account (its docstring):", "", "```text", detail.strip("\n"), "```", ""]
    out += wrong_section(kind, fidelity)
    out += ["## Chip records", "", f"{len(chips)} record(s) from `common.chips` (the catalog). `not published` "
            "means the vendor gives no figure; estimates are listed apart with their derivation.", ""]
    for chip in chips:
        out += chip_section(chip)
    return "\n".join(out)


def fidelity_alt_text(fidelity: dict) -> str:
    """One sentence describing the fidelity figure, from the numbers it plots."""
    rows = fidelity["rows"]
    sourced = [r["ratio"] for r in rows if r["group"] == "sourced"]
    bounds = [r["ratio"] for r in rows if r["group"] != "sourced"]
    inside = sum(0.5 <= r <= 2.0 for r in sourced)
    text = (f"Dot plot of simulated over published speed for {len(rows)} published figures, one row per "
            f"architecture on a log axis: the {len(sourced)} sourced figures, drawn as circles, lie between "
            f"{min(sourced, default=1):.2f}x and {max(sourced, default=1):.2f}x, {inside} of them inside the "
            "shaded 0.5x-2x band")
    if bounds:
        text += (f", and the {len(bounds)} bounds, drawn as triangles, lie between {min(bounds):.2f}x and "
                 f"{max(bounds):.2f}x")
    return text + "."


def fidelity_figure(fidelity: dict, path) -> None:
    """A dot per figure: simulated / published on a log axis, one row per architecture, the 2x band shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = [k for k in TITLES if any(r["backend"] == k for r in fidelity["rows"])]
    fig, ax = plt.subplots(figsize=(7, 0.6 * len(kinds) + 1.4), dpi=120)
    ax.axvspan(0.5, 2.0, color="0.92", zorder=0)
    ax.axvline(1.0, color="0.5", lw=0.8)
    for y, kind in enumerate(kinds):
        for r in (r for r in fidelity["rows"] if r["backend"] == kind):
            bound = r["group"] != "sourced"
            ax.scatter(r["ratio"], y, marker="^" if bound else "o", s=28, alpha=0.75,
                       color=SEQUENCE[1] if bound else SEQUENCE[0], zorder=2)
    ax.set_xscale("log")
    ax.minorticks_off()
    ax.set_yticks(range(len(kinds)), [TITLES[k] for k in kinds])
    ticks = [0.5, 1, 2, 4] + ([8] if max(r["ratio"] for r in fidelity["rows"]) > 4 else [])
    ax.set_xticks(ticks, [f"{t:g}x" for t in ticks])
    ax.set_xlim(0.4, 2 ** math.ceil(math.log2(max(r["ratio"] for r in fidelity["rows"])) + 0.3))
    ax.set_xlabel("simulated / published (circles: sourced; triangles: bounds)")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
