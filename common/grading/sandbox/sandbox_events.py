"""What a sandbox sends back, read by the parent: the runner's JSON lines, and a bounded tail of its log.

The runner writes one JSON line per event to its private pipe (runner.py): ``start`` (with the load factor
its calibration measured), one ``cell`` per code cell, and ``end``. ``read_events`` turns them into an
``Execution`` as they arrive, so what came before a crash or a kill is kept. ``LogTail`` drains the sandbox's
stdout and stderr, which student code can reach (``/proc/1/fd/1`` is bubblewrap's), keeping only the end.
"""

from __future__ import annotations

import json
import os
import selectors
import threading
import time
from dataclasses import dataclass, field

from common.grading.sandbox.limits import scaled_seconds

# Results are a few MB at most; anything beyond this is a runaway and is cut.
MAX_RESULT_BYTES = 256 * 1024**2


@dataclass
class Execution:
    """What came back from one notebook: the outputs of each cell that finished, and how the run ended."""

    cells: dict[int, dict] = field(default_factory=dict)
    status: str = "error"  # completed | time_limit | kernel_died | error
    message: str = ""
    failed_cell: int | None = None
    seconds: float = 0.0
    load_factor: float = 1.0  # how much the runner's calibration stretched the wall-time limits
    retried: bool = False  # this is the second run, at doubled limits, after the first hit a time limit
    log: str = ""  # the end of what the sandbox wrote to its stdout/stderr, for error messages (not sent on)
    log_bytes: int = 0  # how much it wrote there in all; everything before the tail was dropped

    def to_json(self) -> dict:
        return {
            "cells": {str(i): c for i, c in self.cells.items()},
            "status": self.status,
            "message": self.message,
            "failed_cell": self.failed_cell,
            "seconds": self.seconds,
            "load_factor": self.load_factor,
            "retried": self.retried,
        }


class LogTail(threading.Thread):
    """Reads a pipe to its end in the background, keeping only its last ``keep`` bytes; closes it at the end."""

    def __init__(self, fd: int, keep: int):
        super().__init__(name="dfa-sandbox-log", daemon=True)
        self.fd, self.keep, self.total = fd, keep, 0
        self._tail = bytearray()
        self.start()

    def run(self) -> None:
        try:
            while chunk := os.read(self.fd, 1 << 16):
                self.total += len(chunk)
                self._tail += chunk
                if len(self._tail) > 2 * self.keep:  # trim in batches: linear in what was written
                    del self._tail[: -self.keep]
        finally:
            os.close(self.fd)

    def text(self) -> str:
        return bytes(self._tail[-self.keep :]).decode(errors="replace")


def read_events(fd: int, started: float, notebook_s: float, max_factor: float) -> Execution:
    """Read the runner's JSON lines until it closes the pipe, the notebook's time is up, or too much arrives.

    The time allowed is ``notebook_s`` stretched by the load factor the runner reports when it starts (checked
    against the clamp here too); its calibration runs before any student code, so that code cannot change it.
    A line is split off once, when its newline arrives: a long one costs linear time, not quadratic.
    """
    execution = Execution(status="error", message="")
    pending, total = bytearray(), 0
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while True:
            allowed = scaled_seconds(notebook_s, execution.load_factor)
            remaining = started + allowed - time.monotonic()
            if remaining <= 0:
                execution.status, execution.message = (
                    "time_limit",
                    f"the notebook ran past its {allowed} s total time limit",
                )
                break
            if not selector.select(timeout=min(remaining, 1.0)):
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            total += len(chunk)
            if total > MAX_RESULT_BYTES:
                execution.status, execution.message = "error", "the notebook produced too much output"
                break
            pending += chunk
            if b"\n" in chunk:
                *lines, rest = pending.split(b"\n")
                pending = bytearray(rest)
                for line in lines:
                    apply_event(execution, line, max_factor)
    if execution.status == "running":
        execution.status, execution.message = "error", "the sandbox stopped without finishing the notebook"
    return execution


def apply_event(execution: Execution, line: bytes, max_factor: float) -> None:
    try:
        event = json.loads(line)
    except ValueError:
        return
    kind = event.get("event")
    if kind == "start":
        execution.status = "running"
        factor = event.get("load_factor")
        if isinstance(factor, (int, float)) and 1.0 <= factor <= max_factor:  # (NaN fails both)
            execution.load_factor = float(factor)
    elif kind == "cell" and isinstance(event.get("index"), int) and isinstance(event.get("outputs"), list):
        execution.cells[event["index"]] = {
            "outputs": event["outputs"],
            "execution_count": event.get("execution_count"),
        }
        if isinstance(event.get("probe"), dict):  # a test cell's probe data, judged by the parent (judge.py)
            execution.cells[event["index"]]["probe"] = event["probe"]
    elif kind == "end":
        execution.status = str(event.get("status", "error"))
        execution.message = str(event.get("message", ""))
        cell = event.get("cell")
        execution.failed_cell = cell if isinstance(cell, int) else None
