"""The explorer a learner drives: ipywidgets controls around ``whatif`` and ``figure``.

``explore(model=..., backends=..., **choices)`` returns an ``Explorer``. In a live notebook (Colab, JupyterLab,
VS Code) it shows sliders and menus; each change re-simulates the chosen machines and redraws the one figure and
the table in place. A choice no machine can take shows its reason in one line, never a traceback. Where widgets
cannot render (no kernel, or ``NBGRADER_EXECUTION``, ``CI`` or ``DFA_STATIC`` set: grading, papermill runs of
the project, CI) the same call prints the table and saves the figure to ``static_path``. ``.update(**changes)``
does from code what a control does, ``.table()`` gives the rows as a DataFrame. ``.context(**changes)`` is the
context view (``common.explore.context``): per machine, where the KV cache lives, whether it still fits, and how
many sequences a contiguous or a paged cache holds; ``.context_figure(seqs)`` draws where the context runs out."""
from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from common.errors import DFAError
from common.explore import context as ctx_mod
from common.explore import figure as fig_mod
from common.explore.whatif import Choices, machine_rows
from common.palette import EMPHASIS
from common.sim.args import BACKEND_NAMES, PHASES

BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
SEQS = (128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072)
DTYPES = ("native", "fp32", "bf16", "fp16", "fp8", "int8")
STATIC_ENV = ("NBGRADER_EXECUTION", "CI", "DFA_STATIC")


def widgets_can_render() -> bool:
    """True in a notebook kernel with a front end; False in a plain shell, under grading or CI (``STATIC_ENV``)."""
    if any(os.environ.get(v) for v in STATIC_ENV):
        return False
    try:
        import ipywidgets  # noqa: F401
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def _display_table(table: pd.DataFrame) -> pd.DataFrame:
    """The rows as a learner reads them: units in the headers, shares in per cent."""
    out = pd.DataFrame({
        "machine": table["machine"], "chip": table["chip"], "chips": table["chips"], "stack": table["stack"],
        "ms/step": table["time_s"] * 1e3, "tok/s": table["tokens_per_s"],
        "tok/s/user": table["tokens_per_s_per_user"], "bound": table["bottleneck"],
        **{f"{s} %": table[f"{s}_share"] * 100 for s in ("compute", "memory", "communication", "scheduling")},
        "GB moved by level": [", ".join(f"{k} {v / 1e9:.3g}" for k, v in b.items()) if isinstance(b, dict) else ""
                              for b in table["bytes_by_level"]],
        "problem": table["problem"]})
    out.attrs = dict(table.attrs)
    return out


class Explorer:
    """The choices, their rows, the figure, and (live) the controls; see the module docstring. A view of other
    rows over the same choices (``roofline_view``) overrides the three hooks: ``_new_figure``, ``_rows_for`` and
    ``_draw``."""

    def __init__(self, choices: Choices, *, interactive: bool | None = None,
                 static_path: str | os.PathLike = "dfa_out/explorer.png"):
        self.choices = choices.checked()
        self.interactive = widgets_can_render() if interactive is None else interactive
        self.static_path = Path(static_path)
        self.figure, self.axes = self._new_figure()
        self.message = ""
        self._rows = self._rows_for(self.choices)
        self._draw(self._rows)
        self.widget = self._build() if self.interactive else None

    # ---- the view's hooks ----
    def _new_figure(self):
        return fig_mod.new_figure()

    def _rows_for(self, choices: Choices) -> pd.DataFrame:
        return machine_rows(choices)

    def _draw(self, rows: pd.DataFrame) -> None:
        fig_mod.draw(self.figure, self.axes, rows)

    # ---- what code and controls share ----
    def table(self) -> pd.DataFrame:
        """The current rows, SIMULATED (``whatif.machine_rows``)."""
        return self._rows.copy()

    def update(self, **changes) -> pd.DataFrame:
        """Apply ``changes`` (fields of ``Choices``); a bad one keeps the last good view and sets ``message``."""
        try:
            choices = self.choices.changed(**changes)
            rows = self._rows_for(choices)
        except DFAError as exc:
            self.message = str(exc).splitlines()[0]
        else:
            self.choices, self._rows, self.message = choices, rows, ""
            self._draw(rows)
        self._refresh()
        return self.table()

    def context(self, *, block_size: int = 16, mean_tokens: int | None = None, **changes) -> pd.DataFrame:
        """The context view of the current choices with ``changes`` (a what-if: the explorer keeps its state).
        A bad choice raises one DFAError line, so a search over contexts stops at it."""
        choices = self.choices.changed(**changes) if changes else self.choices
        return ctx_mod.context_rows(choices, block_size=block_size, mean_tokens=mean_tokens)

    def context_figure(self, seqs=SEQS, **changes):
        """Draw where each machine's context runs out over ``seqs`` (on the chips that hold the current choice,
        or ``chip_counts``); saved beside ``static_path`` (``*_context.png``) where widgets cannot render. It is
        shown as the cell's result (end the cell with this call; a ``plt.show()`` after it shows nothing): the
        figure leaves pyplot in both modes, so the inline backend draws no second copy."""
        import matplotlib.pyplot as plt

        choices = self.choices.changed(**changes) if changes else self.choices
        fig, ax = plt.subplots(figsize=(8, 4.2), layout="constrained")
        ctx_mod.draw_context(ax, ctx_mod.context_curves(choices, seqs))
        fig.suptitle(f"SIMULATED: {choices.model}, batch {choices.batch}, dtype {choices.dtype or 'native'}",
                     fontsize=10)
        if not self.interactive:
            path = self.static_path.with_name(self.static_path.stem + "_context.png")
            path.parent.mkdir(parents=True, exist_ok=True)
            fig.savefig(path, dpi=110)
        fig_mod.leave_pyplot(fig)  # the cell's result shows it; left in pyplot, the inline backend adds a copy
        return fig

    def show(self) -> None:
        """Live: the controls, table and figure. Static: print the table and save the figure."""
        if self.interactive:
            from IPython.display import display
            display(self.widget)
            return
        self.static_path.parent.mkdir(parents=True, exist_ok=True)
        self.figure.savefig(self.static_path, dpi=110)
        with pd.option_context("display.width", 200, "display.max_columns", 30, "display.precision", 3):
            print(self._rows.attrs.get("label", "SIMULATED"))
            print(_display_table(self._rows).drop(columns=["stack"]).to_string(index=False))
        if self.message:
            print(f"not applied: {self.message}")
        print(f"figure saved: {self.static_path}")

    def _ipython_display_(self):
        self.show()

    # ---- the controls ----
    def _build(self):
        import ipywidgets as w
        c = self.choices
        self.controls = {
            "backends": w.SelectMultiple(options=BACKEND_NAMES, value=c.backends, description="machines",
                                         rows=5),
            "phase": w.ToggleButtons(options=PHASES, value=c.phase, description="phase"),
            "batch": w.SelectionSlider(options=BATCHES, value=min(BATCHES, key=lambda b: abs(b - c.batch)),
                                       description="batch", continuous_update=False),
            "seq": w.SelectionSlider(options=SEQS, value=min(SEQS, key=lambda s: abs(s - c.seq)),
                                     description="seq", continuous_update=False),
            "dtype": w.Dropdown(options=DTYPES, value=c.dtype or "native", description="dtype"),
            "model": w.Text(value=c.model, description="model", continuous_update=False),
        }
        self._status = w.HTML()
        fig_mod.leave_pyplot(self.figure)
        self._out_table, self._out_figure, self._out_context = w.Output(), w.Output(), w.Output()
        for name, control in self.controls.items():
            control.observe(lambda change, name=name: self._on_change(name, change["new"]), names="value")
        self._refresh()
        return w.VBox([w.HBox([self.controls["backends"], w.VBox([self.controls[k] for k in
                                                                   ("model", "phase", "batch", "seq", "dtype")])]),
                       self._status, self._out_figure, self._out_table, self._out_context])

    def _on_change(self, name: str, value) -> None:
        value = {"dtype": None if value == "native" else value, "backends": tuple(value) if name == "backends"
                 else value}.get(name, value) if name in ("dtype", "backends") else value
        self.update(**{name: value})

    def _refresh(self) -> None:
        if not self.interactive or not hasattr(self, "_status"):
            return
        from html import escape

        from IPython.display import HTML, display
        self._status.value = (f"<span style='color:{EMPHASIS}'>not applied: {escape(self.message)}</span>"
                              if self.message else f"<i>{escape(self._rows.attrs.get('label', ''))}</i>")
        with self._out_figure:
            self._out_figure.clear_output(wait=True)
            display(self.figure)
        with self._out_table:
            self._out_table.clear_output(wait=True)
            display(HTML(_scrolling(self._table_frame().to_html(index=False, float_format=lambda v: f"{v:.3g}",
                                                                na_rep=""))))
        with self._out_context:
            self._out_context.clear_output(wait=True)
            context = self._context_frame()
            if context is not None:
                display(HTML("<b>Where the KV cache lives and whether it fits</b>" + _scrolling(context.to_html(
                    index=False, float_format=lambda v: f"{v:.3g}", na_rep=""))))

    def _table_frame(self) -> pd.DataFrame:
        """The table a live refresh shows (a view subclass shows its own)."""
        return _display_table(self._rows)

    def _context_frame(self) -> pd.DataFrame | None:
        """The KV-cache fit table under it (None: a view that has none)."""
        return self.context().drop(columns=["weight_bytes"])


def _scrolling(table_html: str) -> str:
    """A table wider than the notebook scrolls sideways instead of losing its last columns at the edge."""
    return f'<div style="overflow-x: auto; max-width: 100%">{table_html}</div>'


def explore(model: str = "llama-3.1-8b", backends=BACKEND_NAMES, *, interactive: bool | None = None,
            static_path: str | os.PathLike = "dfa_out/explorer.png", show: bool = True, **choices) -> Explorer:
    """An ``Explorer`` on ``model`` for ``backends`` (one name or several), shown at once unless ``show=False``.
    ``choices``: phase, batch, seq, dtype, stack, chips ({backend: chip}), chip_counts ({backend: n})."""
    try:
        made = Choices(model=model, backends=backends, **choices)
    except TypeError as exc:
        raise DFAError(f"explore: {exc}; choices are {', '.join(Choices.__dataclass_fields__)}") from None
    explorer = Explorer(made, interactive=interactive, static_path=static_path)
    if show:
        explorer.show()
    return explorer
