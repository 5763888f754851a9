"""What runs inside the sandbox: execute one notebook with nbgrader's ``Execute`` and report each cell.

``python -m common.grading.sandbox.runner run --result-fd N --config JSON`` is the sandbox's first process. It copies
the submission into its scratch space, starts a kernel and executes the notebook cell by cell. After each code
cell it writes one JSON line — the cell's outputs — to file descriptor ``N``, a pipe only it holds: its
standard streams point to /dev/null before any student code runs, the kernel does not inherit the pipe, and
the runner makes itself non-dumpable so a same-user process cannot reach its file descriptors through /proc.
A last line says how the run ended: ``completed``, ``time_limit`` (a cell ran past its limit), ``kernel_died``
or ``error``.

Before the kernel starts, and so before any student code, the runner times a calibration workload and
stretches the wall-time limits by the factor it finds (limits.py); the first line, ``start``, reports it.

Stream outputs are coalesced here (``coalesce_streams``), in linear time, while the cell's output cap holds:
nbclient's own coalescing is quadratic in the length of a line and runs after the cell, outside its timeout,
so one ``print("y" * 2_000_000)`` would stall a worker for hours.

``python -m common.grading.sandbox.runner kernel --config JSON -- ARGS`` is how the kernel starts: it applies the
resource limits (data segment, CPU time, file size, processes, no core dumps) to itself, asks the OOM killer
to pick it first, then becomes ``python -m ipykernel_launcher ARGS``.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import resource
import shutil
import stat
import sys
import tempfile
import time
from pathlib import Path

from common.grading.sandbox.limits import measure_load_factor, scaled_seconds
from common.grading.sandbox.quick_start import skip_unused_iri_check

KERNEL_NAME = "dfa-sandbox"
NOT_RUN = "[not run by the grader: an ungraded 'Going further' cell; run it yourself in the lab]\n"
TIMEOUT_ENAME = "CellTimeoutError"


def _silence_standard_streams() -> None:
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)


def _make_undumpable() -> None:
    """PR_SET_DUMPABLE=0: processes of the same user can no longer open /proc/<runner>/fd or ptrace us."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def copy_regular_files(source: Path, dest: Path) -> None:
    """Copy a submission folder, skipping symlinks, hard links and special files (they could point outside it)."""
    dest.mkdir(parents=True, exist_ok=True)
    for entry in os.scandir(source):
        mode = entry.stat(follow_symlinks=False).st_mode
        if stat.S_ISDIR(mode):
            copy_regular_files(Path(entry.path), dest / entry.name)
        elif stat.S_ISREG(mode) and entry.stat(follow_symlinks=False).st_nlink == 1:  # not a hard link
            shutil.copyfile(entry.path, dest / entry.name)


def _write_kernelspec(config: dict) -> str:
    """A kernelspec whose command is our limited launcher; returns the directory to put on JUPYTER_PATH."""
    root = Path(tempfile.mkdtemp(prefix="dfa-kernels-"))
    spec = root / "kernels" / KERNEL_NAME
    spec.mkdir(parents=True)
    argv = [
        sys.executable,
        "-m",
        "common.grading.sandbox.runner",
        "kernel",
        "--config",
        json.dumps({"limits": config.get("kernel_limits", {})}),
        "--",
        "-f",
        "{connection_file}",
    ]
    (spec / "kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": "Python 3 (sandboxed)", "language": "python"})
    )
    return str(root)


def _seed_matplotlib_cache(config: dict) -> None:
    """Copy the parent's prebuilt font cache, so each sandbox does not spend seconds rebuilding it."""
    seed, target = config.get("mpl_cache"), os.environ.get("MPLCONFIGDIR")
    if seed and target and Path(seed).is_dir():
        copy_regular_files(Path(seed), Path(target))


def _drop_overwritten(text: str) -> str:
    """What a terminal shows of ``text``: on each line, only what follows its last carriage return that is
    not the line's last character. nbclient's regular expression ``.*\\r(?=[^\\n])`` does the same, but scans
    the rest of the line again from every position of it."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        cut = line.rfind("\r", 0, len(line) - 1)
        if cut >= 0:
            lines[i] = line[cut + 1 :]
    return "\n".join(lines)


def coalesce_streams(outputs: list) -> list:
    """Merge every stream output into the first one of its name, as nbclient's ``coalesce_streams`` does, in
    time linear in the text: carriage returns as ``_drop_overwritten`` says, and a stdout stream that follows
    the stderr one moved before it. Backspaces stay: nbclient's loop that would remove them never runs (its
    condition compares two lengths that are equal at the start), and grading must not change with this."""
    merged, first, parts = [], {}, {}
    for output in outputs:
        if output.get("output_type") == "stream":
            name = output.get("name")
            if name in first:
                parts[name].append(output.get("text", ""))
                continue
            first[name], parts[name] = output, [output.get("text", "")]
        merged.append(output)
    for name, output in first.items():
        output["text"] = _drop_overwritten("".join(parts[name]))
    if "stderr" in first and "stdout" in first:
        i = merged.index(first["stderr"])
        if i + 1 < len(merged) and merged[i + 1] is first["stdout"]:
            merged[i], merged[i + 1] = merged[i + 1], merged[i]
    return merged


def _streaming_execute_class():
    # imported here, not at the top: the parent imports this module for copy_regular_files, and the runner's
    # main() first skips an import they would pay for (quick_start)
    from nbformat.v4 import new_code_cell, new_output
    from nbgrader.preprocessors import Execute

    from common.grading.courses import standard
    from common.grading.verdicts.judge import probe_payloads

    class StreamingExecute(Execute):
        """nbgrader's Execute, reporting each code cell as soon as it ran and capping its output."""

        def __init__(self, emit, max_cell_output_bytes: int, tests: dict, **kwargs):
            super().__init__(**kwargs)
            self._emit = emit
            self._tests = tests
            self.skipped: set[int] = set()  # standard.ungraded_tail of the notebook, set in preprocess
            self._max_bytes = max_cell_output_bytes
            self._cell_bytes = 0
            self._truncated = False
            self.current_index = None
            self.timed_out: list[int] = []  # cells interrupted at the time limit, after which the run went on

        def preprocess(self, nb, resources=None, km=None):
            self.skipped = standard.ungraded_tail(nb.cells, {int(i) for i in self._tests})
            return super().preprocess(nb, resources, km)

        def _run(self, cell, resources, index):
            """Execute one cell; True if the time limit interrupted it."""
            self._cell_bytes, self._truncated = 0, False
            started = time.monotonic()
            super().preprocess_cell(cell, resources, index)
            cell.outputs = coalesce_streams(cell.outputs)
            # nbclient marks an interrupted cell with this error; the elapsed time tells it from a learner who
            # merely raises an exception of that name
            return time.monotonic() - started >= self.timeout and any(
                o.get("output_type") == "error" and o.get("ename") == TIMEOUT_ENAME for o in cell.outputs
            )

        def _run_probe(self, test: dict, resources, index) -> dict:
            """The test's probe, executed in the kernel on its own: what it printed for the grader (judge.py
            judges it outside the sandbox), the error it raised, whether it ran out of time."""
            probe = new_code_cell(test["probe"])
            interrupted = self._run(probe, resources, index) if test["probe"].strip() else False
            errors = [o for o in probe.outputs if o.get("output_type") == "error"]
            error = f"{errors[0].get('ename', '')}: {str(errors[0].get('evalue', ''))[:300]}" if errors else ""
            return {"data": probe_payloads(probe.outputs), "error": error, "timed_out": interrupted,
                    "truncated": self._truncated}  # fmt: skip

        def preprocess_cell(self, cell, resources, index):
            self.current_index = index
            if index in self.skipped:  # carries no point: not worth a kernel second (throughput)
                cell.outputs, cell.execution_count = [new_output("stream", name="stdout", text=NOT_RUN)], None
                self._emit(event="cell", index=index, execution_count=None, outputs=cell.outputs)
                return cell, resources
            test = self._tests.get(str(index)) if cell.cell_type == "code" else None
            probe = self._run_probe(test, resources, index) if test is not None else None
            if probe is not None and probe["timed_out"]:
                self.timed_out.append(index)
            if cell.cell_type != "code":
                return super().preprocess_cell(cell, resources, index)
            if self._run(cell, resources, index):
                self.timed_out.append(index)
            if test is not None:  # the visible checks' outputs stay as feedback; only the judgement's error counts
                cell.outputs = coalesce_streams([_as_text(o) for o in cell.outputs])
            if self._truncated:
                cell.outputs.append(new_output("stream", name="stdout", text="\n[output truncated by the grader]\n"))
            event = {"index": index, "execution_count": cell.get("execution_count"), "outputs": cell.outputs}
            self._emit(event="cell", **event, **({"probe": probe} if probe is not None else {}))
            return cell, resources

        def output(self, outs, msg, display_id, cell_index):
            # Drop output beyond the cap as it arrives, so a print loop cannot fill the runner's memory.
            self._cell_bytes += len(json.dumps(msg.get("content", {}), default=str))
            if self._cell_bytes > self._max_bytes:
                self._truncated = True
                return None
            return super().output(outs, msg, display_id, cell_index)

    return StreamingExecute


def _as_text(output: dict) -> dict:
    """A test cell's own output as feedback: its errors and stderr become stdout text, so nothing the learner's
    kernel prints can decide the cell's grade (nbgrader zeroes a cell with an error or stderr): only the
    judgement's error can (judge.py, added by the parent)."""
    from nbformat.v4 import new_output

    if output.get("output_type") == "error":
        text = f"[your kernel, visible check] {output.get('ename', '')}: {output.get('evalue', '')}\n"
        return new_output("stream", name="stdout", text=text)
    if output.get("output_type") == "stream" and output.get("name") == "stderr":
        return new_output("stream", name="stdout", text=output.get("text", ""))
    return output


def _read_tests(fd) -> dict:
    """The test cells (testcells.split), from the descriptor the parent passed; read before any kernel."""
    if fd is None:
        return {}
    with os.fdopen(fd, "rb") as f:
        return json.loads(f.read() or b"{}")


def run(result_fd: int, config: dict) -> int:
    os.set_inheritable(result_fd, False)
    out = os.fdopen(result_fd, "w", encoding="utf-8")

    def emit(**event) -> None:
        out.write(json.dumps(event, default=str) + "\n")
        out.flush()

    _silence_standard_streams()
    _make_undumpable()
    executor = None
    try:
        import nbformat
        from nbclient.exceptions import CellTimeoutError, DeadKernelError

        tests = _read_tests(config.get("tests_fd"))
        workdir = Path(config["workdir"])
        copy_regular_files(Path(config["source"]), workdir)
        _seed_matplotlib_cache(config)
        os.environ["JUPYTER_PATH"] = _write_kernelspec(config)
        nb = nbformat.read(workdir / config["notebook"], as_version=4)
        factor = measure_load_factor(config.get("max_load_factor", 1.0))
        timeout = scaled_seconds(config["cell_timeout"], factor)
        executor = _streaming_execute_class()(
            emit,
            config["max_cell_output_bytes"],
            tests,
            kernel_name=KERNEL_NAME,
            timeout=timeout,
            startup_timeout=scaled_seconds(config.get("startup_timeout", 60), factor),
            # also how long an interrupted cell has to stop, which a busy machine stretches as well
            iopub_timeout=scaled_seconds(10, factor),
            coalesce_streams=False,  # done in linear time in preprocess_cell instead
            # every output is in by then; a graceful shutdown waits ~3 s for the kernel's exit handlers, and
            # the sandbox kills whatever the kernel leaves behind anyway
            shutdown_kernel="immediate",
        )
        emit(event="start", cells=len(nb.cells), load_factor=factor, cell_timeout=timeout)
        try:
            executor.preprocess(nb, {"metadata": {"path": str(workdir)}})
        except DeadKernelError:
            emit(
                event="end",
                status="kernel_died",
                cell=executor.current_index,
                message="the kernel died (os._exit, a crash, or a memory or CPU-time limit)",
            )
        except CellTimeoutError:
            cell = executor.current_index
            emit(
                event="end",
                status="time_limit",
                cell=cell,
                message=f"cell {cell} ran past the {timeout} s time limit and did not stop when interrupted, "
                "so the later cells were not run",
            )
        else:
            if executor.timed_out:
                cells = ", ".join(map(str, executor.timed_out))
                which = f"cells {cells} each" if len(executor.timed_out) > 1 else f"cell {cells}"
                emit(
                    event="end",
                    status="time_limit",
                    cell=executor.timed_out[0],
                    message=f"{which} ran past the {timeout} s time limit and stopped when interrupted; "
                    "the later cells ran",
                )
            else:
                emit(event="end", status="completed")
    except Exception as exc:  # report, never hang: the parent treats unreported cells as not run
        emit(
            event="end",
            status="error",
            cell=getattr(executor, "current_index", None),
            message=f"{type(exc).__name__}: {str(exc)[:500]}",
        )
    return 0


def exec_kernel(config: dict, kernel_args: list[str]) -> None:
    for name, value in config.get("limits", {}).items():
        resource.setrlimit(getattr(resource, name), (int(value), int(value)))
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")
    except OSError:
        pass
    os.execv(sys.executable, [sys.executable, "-m", "ipykernel_launcher", *kernel_args])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m common.grading.sandbox.runner")
    sub = parser.add_subparsers(dest="command", required=True)
    run_parser = sub.add_parser("run")
    run_parser.add_argument("--result-fd", type=int, required=True)
    run_parser.add_argument("--config", required=True)
    kernel_parser = sub.add_parser("kernel")
    kernel_parser.add_argument("--config", required=True)
    kernel_parser.add_argument("kernel_args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.command == "kernel":
        rest = args.kernel_args[1:] if args.kernel_args[:1] == ["--"] else args.kernel_args
        exec_kernel(json.loads(args.config), rest)
        return 1  # not reached
    skip_unused_iri_check()  # before anything imports nbformat: a second off every sandboxed run's start
    return run(args.result_fd, json.loads(args.config))


if __name__ == "__main__":
    sys.exit(main())
