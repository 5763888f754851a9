"""The three nbgrader preprocessors ``dfa`` adds to nbgrader's own pipelines.

* ``RestoreCellMetadata`` — first step of autograding: re-match the submission's cells to the release
  notebook (rematch.py), so a notebook saved by Colab, or tampered with, is graded like the original.
* ``MergeSandboxOutputs`` — stands in for nbgrader's ``Execute``: takes each cell's outputs from what the
  sandbox reported, and marks every code cell the sandbox did not finish as failed (an unexecuted test cell
  would otherwise count as passed: no error output).
* ``HideHiddenTests`` — feedback only: removes hidden-test code from test cells and shortens their
  tracebacks to the exception line, since a traceback quotes the code that failed (nbgrader issue #917).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import nbformat
from nbformat.v4 import new_output
from nbgrader.preprocessors import ClearHiddenTests, NbGraderPreprocessor
from traitlets import Unicode

from common.grading.courses.standard import is_autograded_test
from common.grading.gradebook import rematch


def cells_digest(nb) -> str:
    """Fingerprint of a notebook's cells (type and source), to check a sandbox result belongs to it."""
    cells = [[cell.cell_type, cell.source] for cell in nb.cells]
    return hashlib.sha256(json.dumps(cells).encode()).hexdigest()


class RestoreCellMetadata(NbGraderPreprocessor):
    release_dir = Unicode("", help="The course's release/ folder, with the notebooks to match.").tag(
        config=True
    )

    def preprocess(self, nb, resources):
        info = resources["nbgrader"]
        path = Path(self.release_dir) / info["assignment"] / f"{info['notebook']}.ipynb"
        if not self.release_dir or not path.is_file():
            self.log.warning("No release notebook %s: cell metadata is taken as submitted", path)
            return nb, resources
        release = nbformat.read(path, as_version=4)
        for note in rematch.restore(nb, release):
            self.log.warning("%s/%s: %s", info["student"], info["notebook"], note)
        return nb, resources


class MergeSandboxOutputs(NbGraderPreprocessor):
    results_dir = Unicode("", help="Folder of <student>/<notebook>.json sandbox results.").tag(config=True)

    def preprocess(self, nb, resources):
        info = resources["nbgrader"]
        path = Path(self.results_dir) / info["student"] / f"{info['notebook']}.json"
        result = json.loads(path.read_text(encoding="utf-8"))
        if result["digest"] != cells_digest(nb):
            raise RuntimeError(f"the sandbox result {path} was made from a different notebook")
        reason = _not_run_reason(result)
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            record = result["cells"].get(str(index))
            if record is None:
                cell.execution_count = None
                cell.outputs = [] if not cell.source.strip() else [_not_run_error(reason)]
                continue
            cell.execution_count = record.get("execution_count")
            cell.outputs = [_valid_output(output) for output in record.get("outputs", [])]
            if is_autograded_test(cell):
                # nbgrader's determine_grade stops at a test cell's first execute_result and reads it as partial
                # credit (full points for a non-number), before the error that follows it: a learner's
                # sys.displayhook call inside a stub would earn every point. A test cell's verdict is its
                # errors alone, so its results go.
                cell.outputs = [o for o in cell.outputs if o.get("output_type") != "execute_result"]
        return nb, resources


def _not_run_reason(result: dict) -> str:
    status, cell = result.get("status"), result.get("failed_cell")
    where = f" in cell {cell}" if isinstance(cell, int) else ""
    if status == "completed":
        return "the cell produced no result"
    if status == "kernel_died":
        return f"the kernel died{where} (os._exit, a crash, or the memory or CPU-time limit)"
    if status == "time_limit":  # the message names the limit, and the retry if there was one
        return result.get("message") or "a time limit was reached"
    return f"the grader could not run the notebook: {result.get('message') or status}"


def _not_run_error(reason: str):
    return new_output(
        "error",
        ename="NotRun",
        evalue=f"this cell was not run: {reason}",
        traceback=[f"NotRun: this cell was not run: {reason}"],
    )


def _valid_output(output: dict):
    """An output from the sandbox, if it is a well-formed nbformat output; else an error in its place."""
    node = nbformat.from_dict(output)
    try:
        nbformat.validate(node, ref=node.get("output_type"), version=4, version_minor=5)
    except Exception:  # unknown output_type, missing fields, wrong types: all malformed
        return new_output(
            "error",
            ename="InvalidOutput",
            evalue="the cell produced a malformed output",
            traceback=["InvalidOutput: the cell produced a malformed output"],
        )
    return node


class HideHiddenTests(ClearHiddenTests):
    def preprocess_cell(self, cell, resources, index):
        if self._remove_hidden_test_region(cell) and cell.cell_type == "code":
            kept = []
            for output in cell.get("outputs", []):
                if output.output_type == "error":
                    line = f"{output.ename}: {output.evalue}"
                    output.traceback = [line]
                    kept.append(output)
                elif output.output_type == "stream":
                    kept.append(output)  # the visible checks print here; hidden ones print nothing
            cell.outputs = kept
        return cell, resources
