"""Predict, then reveal: a learner commits a prediction before a simulator or explorer shows the answer.

::

    from common.explore import predict
    p = predict("lab1.decode-rank", "Rank the machines by decode tokens/s", kind="ranking",
                choices=("gpu", "tpu", "wse", "lpu", "spyre"), lm=lm, course=1)
    p.commit(["wse", "lpu", "tpu"])              # best first; 3 or more of the choices
    p.reveal({"gpu": 190.0, "tpu": 260.0, ...})  # the outcome: scores (higher is better) or an order
    p.commit(3.5)                                # kind="value": one finite number

Every commit is kept, in order, with its UTC time and a SHA-256 that chains it to the commit before (editing
the file breaks the chain, ``verify`` says where). A commit of the value the last one already holds changes
nothing, so re-running a notebook adds nothing. ``reveal`` judges the last commit made BEFORE the first reveal;
a prediction changed after it is kept and shown, flagged "changed after reveal", never judged in its place. A
reveal before any commit is refused in one line.

The judgement, side by side with the prediction:

- ranking: each machine's predicted and actual place among the machines the learner ranked (hit when equal),
  Kendall's tau = (concordant pairs - discordant pairs) / (n(n-1)/2), 1 for the same order, -1 for the reverse,
  and the rank distance (Spearman's footrule) = sum over machines of |predicted place - actual place|;
- value: the ratio outcome / prediction, a hit when it lies within ``tolerance`` of 1 (``1/tol <= r <= tol``).

Where it is kept: ``PREDICTIONS_FILE`` in the folder of the learner's landscape map (``lm.path``, so a lab's
scratch map under grading keeps its predictions in the same temporary folder); ``reveal`` also writes one
learner row per machine into the map (the lab saves the map). In a live kernel ``form()`` is an ipywidgets form
(menus or a number box and a Commit button that locks them); everywhere else the plain calls above do it all.
"""
from __future__ import annotations

import hashlib
import json
import math
import numbers
import os
import tempfile
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from common.errors import DFAError, unknown
from common.landscape.store import PREDICTIONS_FILE
from common.palette import EMPHASIS

KINDS = ("ranking", "value")
MIN_RANKED = 3  # fewer than three machines is a comparison, not a ranking
GENESIS = "0" * 64


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _digest(previous: str, qid: str, value, at: str) -> str:
    """SHA-256 of (previous digest, question, value, time) as canonical JSON: the commits form a hash chain."""
    text = json.dumps([previous, qid, value, at], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def kendall_tau(predicted: Sequence[str], actual: Sequence[str]) -> float:
    """Kendall's tau between two orders of the same items (module docstring); no ties."""
    place = {m: i for i, m in enumerate(actual)}
    n = len(predicted)
    pairs = n * (n - 1) // 2
    concordant = sum(1 for i in range(n) for j in range(i + 1, n) if place[predicted[i]] < place[predicted[j]])
    return (2 * concordant - pairs) / pairs if pairs else 1.0


class PredictionStore:
    """The predictions file: ``{question: {"question", "kind", "commits": [...], "reveals": [...]}}``, each
    read and written whole (atomically), so two objects on the same file never lose each other's commits."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)

    def load(self) -> dict:
        if not self.path.exists():
            return {}
        try:
            doc = json.loads(self.path.read_text(encoding="utf-8"))
            if not isinstance(doc, dict) or not isinstance(doc.get("questions"), dict):
                raise TypeError("no 'questions' table")
            return doc["questions"]
        except (OSError, ValueError, TypeError) as exc:
            raise DFAError(f"{self.path} is not a predictions file ({exc}); move it away") from None

    def save(self, questions: dict) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump({"version": 1, "questions": questions}, fh, indent=1, ensure_ascii=False)
            os.replace(tmp, self.path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise


class Prediction:
    """One question's prediction; see the module docstring. Built by ``predict``."""

    def __init__(self, qid: str, question: str, kind: str, choices: Sequence[str] | None, store: PredictionStore,
                 lm=None, course: int = 1, system: str | None = None, tolerance: float = 2.0):
        if not isinstance(qid, str) or not qid.strip():
            raise DFAError(f"a prediction needs a question id (a non-empty string), got {qid!r}")
        if kind not in KINDS:
            raise unknown("prediction kind", kind, KINDS)
        if kind == "ranking" and (not choices or len(set(choices)) < MIN_RANKED):
            raise DFAError(f"a ranking needs at least {MIN_RANKED} distinct choices, got {choices!r}")
        if not (isinstance(tolerance, numbers.Real) and tolerance > 1):
            raise DFAError(f"tolerance must be a number > 1 (a factor), got {tolerance!r}")
        self.qid, self.question, self.kind = qid.strip(), question, kind
        self.choices = tuple(choices or ())
        self.store, self.lm, self.course, self.system, self.tolerance = store, lm, course, system, float(tolerance)

    # ---- the record ----
    def record(self) -> dict:
        """This question's entry in the file (commits and reveals), empty lists when there is none yet."""
        entry = self.store.load().get(self.qid, {})
        return {"question": self.question, "kind": self.kind, "commits": list(entry.get("commits", [])),
                "reveals": list(entry.get("reveals", []))}

    def _machine(self, item) -> str:
        """'GPU', 'dfa_gpu', 'gpu' -> the choice it names; anything else one line with the valid choices."""
        names = {c.lower(): c for c in self.choices}
        key = str(item).strip().lower().removeprefix("dfa_")
        if key not in names:
            raise unknown("machine", item, self.choices)
        return names[key]

    def _checked(self, value):
        if self.kind == "value":
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(float(value)):
                raise DFAError(f"{self.qid}: a value prediction is one finite number, got {value!r}")
            return float(value)
        if isinstance(value, str) or not isinstance(value, Sequence):
            raise DFAError(f"{self.qid}: a ranking is a list of machines, best first, from {list(self.choices)}; "
                           f"got {value!r}")
        ranked = [self._machine(item) for item in value]
        if len(set(ranked)) != len(ranked):
            raise DFAError(f"{self.qid}: each machine once in a ranking, got {list(value)!r}")
        if len(ranked) < MIN_RANKED:
            raise DFAError(f"{self.qid}: rank at least {MIN_RANKED} of {list(self.choices)}, got {len(ranked)}")
        return ranked

    def commit(self, value) -> dict:
        """Store ``value`` as the prediction (a new commit unless it equals the last); returns that commit."""
        value = self._checked(value)
        questions = self.store.load()
        entry = questions.setdefault(self.qid, {"question": self.question, "kind": self.kind, "commits": [],
                                                "reveals": []})
        commits = entry["commits"]
        if commits and commits[-1]["value"] == value:
            return dict(commits[-1])
        at = _now()
        previous = commits[-1]["sha256"] if commits else GENESIS
        commit = {"value": value, "at": at, "sha256": _digest(previous, self.qid, value, at),
                  "after_reveal": bool(entry["reveals"])}
        commits.append(commit)
        self.store.save(questions)
        print(f"{self.qid}: prediction committed at {at} (sha256 {commit['sha256'][:12]})"
              + (" - changed AFTER the reveal: kept and shown as such, the earlier one is judged"
                 if commit["after_reveal"] else ""))
        return dict(commit)

    def verify(self) -> list[str]:
        """Commits whose stored digest does not follow from the one before (an edited file); empty when sound."""
        previous, broken = GENESIS, []
        for i, c in enumerate(self.record()["commits"]):
            if _digest(previous, self.qid, c["value"], c["at"]) != c["sha256"]:
                broken.append(f"{self.qid}: commit {i} ({c['at']}) does not match its sha256")
            previous = c["sha256"]
        return broken

    # ---- the reveal ----
    def _actual_order(self, actual, ranked: Sequence[str]) -> list[str]:
        """The outcome as an order of ``ranked``: from scores (higher first; a missing or NaN score, e.g. a
        machine the model does not fit, goes last) or from a sequence given best first."""
        if isinstance(actual, pd.Series):
            actual = actual.to_dict()
        if isinstance(actual, Mapping):
            scores = {self._machine(m): s for m, s in actual.items()}

            def key(m):
                s = scores.get(m)
                bad = s is None or not isinstance(s, numbers.Real) or not math.isfinite(float(s))
                return (bad, 0.0 if bad else -float(s), ranked.index(m))
            return sorted(ranked, key=key)
        order = self._checked(list(actual))
        missing = [m for m in ranked if m not in order]
        if missing:
            raise DFAError(f"{self.qid}: the outcome does not place {missing}")
        return [m for m in order if m in ranked]

    def reveal(self, actual, *, attribute: str | None = None) -> pd.DataFrame:
        """Judge the prediction against ``actual`` and return the side-by-side table (printed too)."""
        entry = self.record()
        before = [c for c in entry["commits"] if not c["after_reveal"]]
        if not before:
            raise DFAError(f"{self.qid}: no prediction committed yet; commit one first (p.commit(...)), then reveal")
        judged, later = before[-1], [c for c in entry["commits"] if c["after_reveal"]]
        if self.kind == "ranking":
            table, summary = self._judge_ranking(judged["value"], actual)
        else:
            table, summary = self._judge_value(judged["value"], actual)
        table.attrs.update(summary, question=self.question, committed_at=judged["at"], sha256=judged["sha256"],
                           changed_after_reveal=[c["value"] for c in later])
        questions = self.store.load()
        questions.setdefault(self.qid, entry)["reveals"] = [*entry["reveals"], {
            "at": _now(), "judged": judged["sha256"], "outcome": table["outcome"].tolist(), **summary}]
        self.store.save(questions)
        self._add_rows(table, attribute or f"prediction: {self.question}")
        with pd.option_context("display.width", 160, "display.max_columns", 10):
            print(f"{self.qid}: {self.question}\n  your prediction committed {judged['at']} "
                  f"(sha256 {judged['sha256'][:12]}), judged against the SIMULATED outcome")
            print(table.to_string(index=False))
            print("  " + ", ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}"
                                   for k, v in summary.items()))
            for c in later:
                print(f"  changed after reveal ({c['at']}): {c['value']!r} - kept, not judged")
        return table

    def _judge_ranking(self, ranked: list[str], actual):
        order = self._actual_order(actual, ranked)
        place = {m: i + 1 for i, m in enumerate(order)}
        scores = actual.to_dict() if isinstance(actual, pd.Series) else actual
        scores = {self._machine(m): v for m, v in scores.items()} if isinstance(scores, Mapping) else {}
        table = pd.DataFrame({
            "machine": ranked, "prediction": range(1, len(ranked) + 1), "outcome": [place[m] for m in ranked],
            "score": [scores.get(m) for m in ranked]})
        pairs = list(zip(table["prediction"], table["outcome"], strict=True))
        table["hit"] = ["hit" if p == o else "miss" for p, o in pairs]
        summary = {"kendall_tau": kendall_tau(ranked, order), "rank_distance": int(sum(abs(p - o) for p, o in pairs)),
                   "hits": int((table["hit"] == "hit").sum())}
        return table, summary

    def _judge_value(self, predicted: float, actual):
        if isinstance(actual, bool) or not isinstance(actual, numbers.Real) or not math.isfinite(float(actual)):
            raise DFAError(f"{self.qid}: the outcome of a value question is one finite number, got {actual!r}")
        ratio = float(actual) / predicted if predicted else math.inf
        hit = 1 / self.tolerance <= ratio <= self.tolerance
        table = pd.DataFrame({"machine": [self.system or ""], "prediction": [predicted], "outcome": [float(actual)],
                              "ratio": [ratio], "hit": ["hit" if hit else "miss"]})
        return table, {"ratio": ratio, "hits": int(hit)}

    def _add_rows(self, table: pd.DataFrame, attribute: str) -> None:
        """One learner row per machine: '<prediction> predicted, <outcome> simulated (hit|miss)'."""
        if self.lm is None:
            return
        from common.landscape.map import SYSTEM_OF_BACKEND
        for row in table.to_dict("records"):
            machine = row["machine"] or self.system
            if not machine:
                continue
            system = SYSTEM_OF_BACKEND.get(str(machine).lower().removeprefix("dfa_"), machine)
            text = (f"#{row['prediction']} predicted, #{row['outcome']} simulated ({row['hit']})"
                    if self.kind == "ranking" else
                    f"{row['prediction']:.3g} predicted, {row['outcome']:.3g} simulated ({row['hit']})")
            self.lm.add(system, attribute, text, course=self.course, source="learner", overwrite=True)

    # ---- the live form ----
    def form(self):
        """An ipywidgets form: menus (ranking) or a number box (value) and a Commit button that locks them."""
        import ipywidgets as w

        if self.kind == "ranking":
            boxes = [w.Dropdown(options=("", *self.choices), description=f"#{i + 1}")
                     for i in range(len(self.choices))]
        else:
            boxes = [w.FloatText(description="prediction")]
        button, status = w.Button(description="Commit", button_style="primary"), w.HTML()

        def on_click(_):
            value = ([b.value for b in boxes if b.value] if self.kind == "ranking" else boxes[0].value)
            try:
                commit = self.commit(value)
            except DFAError as exc:
                status.value = f"<span style='color:{EMPHASIS}'>{exc}</span>"
                return
            for control in (*boxes, button):
                control.disabled = True
            status.value = f"committed {commit['at']} (sha256 {commit['sha256'][:12]})"
        button.on_click(on_click)
        return w.VBox([w.HTML(f"<b>{self.question}</b>"), *boxes, button, status])


def predict(qid: str, question: str, *, kind: str = "ranking", choices: Sequence[str] | None = None, lm=None,
            course: int = 1, system: str | None = None, tolerance: float = 2.0,
            path: str | os.PathLike | None = None) -> Prediction:
    """A ``Prediction`` for question ``qid``, kept beside ``lm``'s file (``PREDICTIONS_FILE``; ``path`` to put
    it elsewhere; neither: beside the shared map). ``choices``: the machines a ranking draws from (3 or more);
    ``system``: the machine a value question is about (its map row); ``tolerance``: a value's hit factor."""
    if path is None:
        from common.landscape.map import LandscapeMap
        path = Path(lm.path if lm is not None else LandscapeMap.default_path()).with_name(PREDICTIONS_FILE)
    return Prediction(qid, question, kind, choices, PredictionStore(path), lm=lm, course=course, system=system,
                      tolerance=tolerance)
