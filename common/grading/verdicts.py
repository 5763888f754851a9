"""The runner's half of the trust model (checker.py is the kernel's): hand a test to the checker, read its
verdict, and turn the verdict into the only outputs a test cell gets.

``TestChannel`` listens on a socket in a private folder; the grading kernel connects once, as it starts,
before any learner code, and the listener then closes, so nothing else can connect. For each test cell
``send`` passes two descriptors over it (SCM_RIGHTS): a memory file holding the test's source, then the
write end of a new pipe whose read end only the runner holds. The checker's child takes the first before
the test runs and the second only after (checker.py says why). ``verdict`` reads that pipe.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import socket
import tempfile

from nbformat.v4 import new_output

ACCEPT_TIMEOUT_S = 60  # the kernel connects as it starts, seconds before the first cell
PIPE_SIZE = 1 << 20  # F_SETPIPE_SZ: a verdict never waits for the runner to read it
F_SETPIPE_SZ = 1031
MAX_VERDICT_BYTES = 512 * 1024


class TestChannel:
    __test__ = False  # not a pytest class

    def __init__(self) -> None:
        self._folder = tempfile.mkdtemp(prefix="dfa-agent-")  # 0700: only this uid may even find it
        self.path = os.path.join(self._folder, "agent")
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._listener.bind(self.path)
        self._listener.listen(1)
        self._agent: socket.socket | None = None
        self.problem = ""

    def _connection(self) -> socket.socket | None:
        if self._agent is None and self._listener is not None:
            self._listener.settimeout(ACCEPT_TIMEOUT_S)
            try:
                self._agent, _ = self._listener.accept()  # the first to connect: the kernel, at its start
            except OSError as exc:
                self.problem = f"the grading kernel never connected to the checker ({exc})"
            finally:
                self._listener.close()
                self._listener = None
                shutil.rmtree(self._folder, ignore_errors=True)
        return self._agent

    def accept(self) -> None:
        """Take the kernel's connection now (before the first cell), closing the listener to anyone else."""
        self._connection()

    def send(self, index: int, test: dict) -> int | None:
        """Queue test ``index`` for the checker; returns the verdict pipe's read end (None: no channel)."""
        agent = self._connection()
        if agent is None:
            return None
        source = os.memfd_create(f"dfa-test-{index}", os.MFD_CLOEXEC)
        read_end, write_end = os.pipe()
        try:
            data = json.dumps({"segments": test["segments"], "imports": test["imports"],
                               "grader": test.get("grader") or {}}).encode()
            view = memoryview(data)
            while view:
                view = view[os.write(source, view) :]
            os.lseek(source, 0, os.SEEK_SET)
            try:
                fcntl.fcntl(write_end, F_SETPIPE_SZ, PIPE_SIZE)
            except OSError:  # not allowed here: the default 64 KiB holds a verdict (checker.MAX_VERDICT_OUTPUT)
                pass
            tag = b"%d" % index
            socket.send_fds(agent, [tag], [source])
            socket.send_fds(agent, [tag], [write_end])
        except OSError as exc:
            os.close(read_end)
            self.problem = f"the checker's channel failed ({exc})"
            return None
        finally:
            os.close(source)
            os.close(write_end)  # the child holds the only write end now
        return read_end

    def verdict(self, fd: int | None) -> dict | None:
        """The verdict the checker wrote, or None. The kernel waited for its child before the cell ended,
        so whatever was written is already in the pipe: read without waiting."""
        if fd is None:
            return None
        os.set_blocking(fd, False)
        chunks, size = [], 0
        try:
            while size < MAX_VERDICT_BYTES:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
        except BlockingIOError:
            pass
        finally:
            os.close(fd)
        try:
            verdict = json.loads(b"".join(chunks))
        except ValueError:
            return None
        return verdict if isinstance(verdict, dict) and isinstance(verdict.get("passed"), bool) else None


def verdict_outputs(verdict: dict | None, timed_out: bool = False, problem: str = "") -> list:
    """A test cell's outputs, from the checker's verdict alone: its visible checks' printed text, and an
    error unless it passed. Without a verdict the cell fails, saying why as far as the runner knows."""
    if verdict is None:
        if timed_out:
            reason = "its check ran past the cell's time limit"
        else:
            reason = problem or "its check did not report (it crashed, or the notebook's code stopped it)"
        return [_error("NotChecked", f"this test cell earned no points: {reason}")]
    outputs = []
    text = verdict.get("stdout")
    if isinstance(text, str) and text:
        outputs.append(new_output("stream", name="stdout", text=text))
    if not verdict["passed"]:
        ename = verdict.get("ename") if isinstance(verdict.get("ename"), str) else "Error"
        evalue = verdict.get("evalue") if isinstance(verdict.get("evalue"), str) else ""
        line = verdict.get("line")
        where = f" (test line {line})" if isinstance(line, int) else ""
        outputs.append(_error(ename, evalue + where))
    return outputs


def _error(ename: str, evalue: str):
    return new_output("error", ename=ename, evalue=evalue, traceback=[f"{ename}: {evalue}"])
