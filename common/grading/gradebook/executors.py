"""Where ``dfa autograde`` runs the sandboxes: threads of this process (default) or Dask distributed workers.

Both are ``concurrent.futures`` executors, so autograde.py has one loop for both: ``submit`` a prepared
submission, ``wait(FIRST_COMPLETED)`` on the futures, ``outcome`` turns a finished future into the
notebooks' Executions. Only the sandboxed execution leaves this process; prepare and score stay in the
parent, the only gradebook writer.

* ``LocalExecutions`` (no flag): a thread pool; each thread runs the sandbox on the prepared folder in place.
  Nothing to set up, and Dask is not imported.
* ``DaskExecutions`` (``--scheduler tls://HOST:PORT`` or ``--cluster local:N``): the task gets the prepared
  folder's files as bytes and the Limits, since a remote worker does not share this filesystem; it stages them
  in its own scratch folder, runs the sandbox there and returns the Executions as JSON (``execute_files``).
  A worker lost mid-task (``KilledWorker``, a cancelled future, a closed connection) raises ``WorkerLost``;
  autograde.py retries that submission once, then marks it ``worker_lost``.

A Dask worker runs whatever function a client of its scheduler sends (``Client.run``), with the worker's rights,
often root. So a scheduler on another machine is used only over TLS with certificates (Dask's ``Security``:
mutual TLS, the scheduler refusing clients without a certificate its CA signed); a plain ``tcp://`` address
that is not loopback is refused (``check_target``), and ``--cluster local:N`` listens on loopback only.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import os
import re
import socket
import threading
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from pathlib import Path, PurePosixPath

from common.errors import DFAError
from common.grading.gradebook import inputs
from common.grading.sandbox.limits import Limits
from common.grading.sandbox.sandbox import Execution, Sandbox, SandboxUnavailable

CLUSTER_HELP = "local:N (a LocalCluster of N single-threaded worker processes on this machine)"
SCHEDULER_PATTERN = re.compile(r"^(?P<scheme>tcp|tls)://(?P<host>[^\s/:]+|\[[0-9a-fA-F:.]+\]):\d{1,5}$")
TLS_OPTIONS = {"ca": ("--tls-ca-file", "distributed.comm.tls.ca-file"),
               "cert": ("--tls-cert", "distributed.comm.tls.client.cert"),
               "key": ("--tls-key", "distributed.comm.tls.client.key")}
TLS_HOWTO = ("serve the scheduler and its workers over TLS with certificates of your own CA (`dask scheduler "
             "--tls-ca-file ca.pem --tls-cert scheduler.pem --tls-key scheduler.key`, the same flags for each `dask "
             "worker`: docs/instructors.md, 'Grading on a cluster') and pass tls://HOST:PORT with --tls-ca-file, "
             "--tls-cert and --tls-key")
INSTALL_HINT = 'install Dask distributed: pip install -e ".[cluster]"'


class WorkerLost(Exception):
    """The Dask worker running a submission died or left before returning its result."""


def parse_cluster(value: str) -> int:
    """``local:N`` → N, the number of local worker processes; anything else is a one-line DFAError."""
    kind, _, count = value.partition(":")
    if kind != "local" or not count.isdigit():
        raise DFAError(f"--cluster takes {CLUSTER_HELP}, got {value!r}")
    if int(count) < 1:
        raise DFAError(f"--cluster local:N needs at least one worker, got {value!r}")
    return int(count)


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address) can only mean this machine: every address it resolves to is
    loopback. A name that does not resolve is not."""
    host = host.strip("[]")
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        found = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except (OSError, UnicodeError):
        return False
    return bool(found) and all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in found)


def tls_files(ca: str | None = None, cert: str | None = None, key: str | None = None) -> dict[str, str]:
    """The client's TLS files: the flags given, else Dask's configuration (``distributed.comm.tls.*``)."""
    given = {"ca": ca, "cert": cert, "key": key}
    if not all(given.values()):
        try:
            import dask

            for name, (_, config_key) in TLS_OPTIONS.items():
                given[name] = given[name] or dask.config.get(config_key, None)
        except ImportError:
            pass
    return {name: str(value) for name, value in given.items() if value}


def check_target(scheduler: str | None, cluster: str | None, tls: dict[str, str] | None = None) -> None:
    """Reject both flags together, a malformed scheduler address, a bad ``--cluster``, or a scheduler on another
    machine without TLS and a client certificate (one line each: whoever reaches an unauthenticated scheduler
    runs code as root on its workers)."""
    if scheduler is not None and cluster is not None:
        raise DFAError(f"give --scheduler or --cluster, not both (got {scheduler!r} and {cluster!r})")
    if cluster is not None:
        parse_cluster(cluster)
    if scheduler is None:
        return
    match = SCHEDULER_PATTERN.match(scheduler)
    if not match:
        raise DFAError(f"--scheduler takes a Dask scheduler address tls://HOST:PORT (tcp:// on loopback), "
                       f"got {scheduler!r}")
    tls = tls_files() if tls is None else tls
    if match["scheme"] == "tcp" and not is_loopback(match["host"]):
        raise DFAError(f"--scheduler {scheduler}: refused, plain tcp:// to another machine lets anyone who reaches "
                       f"that port run code as root on the workers; {TLS_HOWTO}")
    if match["scheme"] == "tls":
        missing = [TLS_OPTIONS[name][0] for name in TLS_OPTIONS if not tls.get(name)]
        if missing:
            raise DFAError(f"--scheduler {scheduler}: TLS needs this client's certificate: give {', '.join(missing)} "
                           f"(or Dask's distributed.comm.tls settings); {TLS_HOWTO}")
        for name, path in tls.items():
            if not Path(path).is_file():
                raise DFAError(f"{TLS_OPTIONS[name][0]} {path}: no such file")


def describe(workers: int, scheduler: str | None, cluster: str | None) -> str:
    if scheduler:
        return f"Dask scheduler {scheduler}"
    if cluster:
        return f"Dask LocalCluster, {parse_cluster(cluster)} worker(s)"
    return f"{workers} worker(s)"


# ---- files in, Executions out: what crosses to a worker ---
def folder_files(folder: Path) -> dict[str, bytes]:
    """The regular files under ``folder`` by relative POSIX path (symlinks, hard links and special files are
    skipped, as the sandbox's own copy skips them; read without following links: inputs.py)."""
    files: dict[str, bytes] = {}
    for root, dirs, names in os.walk(folder):
        dirs.sort()
        for name in sorted(names):
            path = Path(root, name)
            if inputs.entry_problem(path.lstat()) is None:  # a regular file with one name
                with inputs.open_regular(path) as f:
                    files[path.relative_to(folder).as_posix()] = f.read()
    return files


def stage_files(files: dict[str, bytes], dest: Path) -> None:
    for relative, data in files.items():
        parts = PurePosixPath(relative).parts
        if not parts or PurePosixPath(relative).is_absolute() or ".." in parts:
            raise ValueError(f"refusing to stage {relative!r} outside the submission folder")
        target = dest.joinpath(*parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def execution_from_json(record: dict) -> Execution:
    return Execution(
        cells={int(i): c for i, c in record.get("cells", {}).items()},
        status=str(record.get("status", "error")),
        message=str(record.get("message", "")),
        failed_cell=record.get("failed_cell"),
        seconds=float(record.get("seconds", 0.0)),
        load_factor=float(record.get("load_factor", 1.0)),
        retried=bool(record.get("retried", False)),
    )


_checked: dict[tuple, str | None] = {}  # per worker process: has this sandbox been checked, and why not
_checked_lock = threading.Lock()


def _worker_sandbox(limits: Limits, isolated: bool, protect: tuple[str, ...], mode: str) -> Sandbox:
    """This worker's sandbox, checked once per worker process (bubblewrap, cgroups) before its first run."""
    from common.grading.sandbox.sandbox import matplotlib_cache

    sandbox = Sandbox(limits, isolated=isolated, protect=[Path(p) for p in protect], mode=mode)
    key = (limits, isolated, protect, mode)
    with _checked_lock:
        if key not in _checked:
            try:
                sandbox.check_available()
                _checked[key] = None
            except SandboxUnavailable as exc:
                _checked[key] = str(exc)
            matplotlib_cache()
    if _checked[key]:
        raise SandboxUnavailable(f"on Dask worker {socket.gethostname()}: {_checked[key]}")
    return sandbox


def execute_files(
    files: dict[str, bytes],
    notebooks: list[str],
    limits: Limits,
    isolated: bool,
    protect: tuple[str, ...],
    mode: str = "auto",
) -> dict[str, dict]:
    """The Dask task: stage the prepared folder, run each notebook in this worker's sandbox, return JSON.

    Nothing of the course folder is read here; ``protect`` only names folders the sandbox must not expose
    where the worker is the grading machine itself (a LocalCluster).
    """
    from common.grading.gradebook.runs import run_notebook
    from common.grading.sandbox import scratch

    sandbox = _worker_sandbox(limits, isolated, protect, mode)
    staging = Sandbox.scratch_dir("sandbox")  # named after this worker: swept by a later run if it is killed
    try:
        stage_files(files, staging / "submission")
        return {name: run_notebook(sandbox, staging / "submission", f"{name}.ipynb").to_json() for name in notebooks}
    finally:
        scratch.remove_dir(staging)


# ---- the two executors ---
class LocalExecutions:
    """The embedded pool: ``workers`` threads of this process, each running one sandbox at a time."""

    def __init__(self, sandbox: Sandbox, workers: int):
        self.sandbox = sandbox
        self.pool = ThreadPoolExecutor(max(1, workers), thread_name_prefix="dfa-sandbox")
        self._slots = max(1, workers)

    def slots(self) -> int:
        return self._slots

    def submit(self, folder: Path, notebooks: list[str]) -> Future:
        from common.grading.gradebook.runs import run_notebook

        def run() -> dict[str, Execution]:  # in a worker thread: only the sandbox, never the gradebook
            return {name: run_notebook(self.sandbox, folder, f"{name}.ipynb") for name in notebooks}

        return self.pool.submit(run)

    def outcome(self, future: Future) -> dict[str, Execution]:
        return future.result()

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


class DaskExecutions:
    """Sandboxed executions on Dask workers: a scheduler at ``address``, or a LocalCluster of ``local`` workers.

    ``task`` is what a worker runs (default ``execute_files``; the tests wrap it to kill a worker).
    """

    def __init__(self, limits: Limits, isolated: bool, protect: list[Path], mode: str = "auto", *,
                 address: str | None = None, local: int | None = None, task=None,
                 tls: dict[str, str] | None = None):  # fmt: skip
        try:
            import dask
            from distributed import Client, LocalCluster
        except ImportError:
            raise DFAError(f"--scheduler and --cluster need Dask distributed: {INSTALL_HINT}") from None
        self.task = task or execute_files
        self.args = (limits, isolated, tuple(str(p) for p in protect), mode)  # mode: as $DFA_SANDBOX asked here
        self.cluster = None
        # Dask's bookkeeping competes with the sandboxes for the grader's cores: measured on the 2-core
        # benchmark machine, a LocalCluster of one worker idling through a 20 s task used 1.3 s of CPU in the
        # scheduler and 1.6 s in the worker, 0.2 s and 0.1 s with event-loop ticks every 1 s instead of 20 ms,
        # the system monitor every 2 s instead of 0.5 s and no statistical profiler; sandboxes need none of these.
        # worker-saturation 1.0: a worker holds only the task it runs, so a lost worker takes no queued
        # submission down with it.
        quiet = {
            "distributed.admin.tick.interval": "1s",
            "distributed.admin.system-monitor.interval": "2s",
            "distributed.worker.profile.enabled": False,
            "distributed.scheduler.worker-saturation": 1.0,
        }
        with dask.config.set(quiet):
            if local is not None:
                # allowed_failures=0: a lost worker fails its task at once, and autograde.py's one retry is the
                # only one. Memory is capped per sandbox (cgroup, RLIMIT_DATA); Dask's cap would see only the
                # worker process.
                self.cluster = LocalCluster(
                    n_workers=local, threads_per_worker=1, processes=True, dashboard_address=None, host="127.0.0.1",
                    memory_limit=0, silence_logs=logging.ERROR, scheduler_kwargs={"allowed_failures": 0},
                )  # fmt: skip
                address = self.cluster.scheduler_address
            security = None
            if address.startswith("tls://"):  # mutual TLS: check_target made sure all three files are there
                from distributed.security import Security

                tls = tls or tls_files()
                security = Security(tls_ca_file=tls["ca"], tls_client_cert=tls["cert"], tls_client_key=tls["key"],
                                    require_encryption=True)
            try:
                self.client = Client(address, timeout="20s", security=security)
            except (OSError, TimeoutError) as exc:
                if self.cluster is not None:
                    self.cluster.close()
                raise DFAError(f"cannot reach the Dask scheduler at {address}: {exc}") from None
        self.pool = self.client.get_executor(pure=False)  # pure=False: a retry is a new task, not the lost one

    def slots(self) -> int:
        """Worker threads the scheduler has now (a cluster may grow or shrink while grading); at least one."""
        return max(1, sum(self.client.nthreads().values()))

    def submit(self, folder: Path, notebooks: list[str]) -> Future:
        return self.pool.submit(self.task, folder_files(folder), notebooks, *self.args)

    def outcome(self, future: Future) -> dict[str, Execution]:
        from distributed import KilledWorker
        from distributed.comm import CommClosedError

        try:
            records = future.result()
        except (KilledWorker, CancelledError, asyncio.CancelledError, CommClosedError) as exc:
            raise WorkerLost(f"{type(exc).__name__}: {exc}".rstrip(": ")) from exc
        return {name: execution_from_json(record) for name, record in records.items()}

    def close(self) -> None:
        self.pool.shutdown(wait=False)  # (Dask's executor has no cancel_futures: closing the client cancels)
        self.client.close()
        if self.cluster is not None:
            self.cluster.close()


def open_executions(sandbox: Sandbox, workers: int, scheduler: str | None = None, cluster: str | None = None,
                    task=None, tls: dict[str, str] | None = None) -> LocalExecutions | DaskExecutions:  # fmt: skip
    check_target(scheduler, cluster, tls)
    if scheduler is None and cluster is None:
        return LocalExecutions(sandbox, workers)
    local = parse_cluster(cluster) if cluster else None
    return DaskExecutions(sandbox.limits, sandbox.isolated, list(sandbox.protect), sandbox.requested,
                          address=scheduler, local=local, task=task, tls=tls)  # fmt: skip
