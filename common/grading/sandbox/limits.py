"""How much one submission may use while it is graded, and how each limit is enforced.

| limit                   | default | enforced by                                                        |
| ----------------------- | ------- | ------------------------------------------------------------------ |
| wall time per cell      | 120 s   | nbclient interrupts the kernel; if it does not stop, the run ends   |
| wall time per notebook  | 15 min  | the parent kills the whole sandbox                                  |
| memory (data segment)   | 4 GB    | RLIMIT_DATA on the kernel (MemoryError); plus a cgroup when root    |
| CPU time of the kernel  | 10 min  | RLIMIT_CPU (the kernel is killed, later cells count as not run)     |
| processes and threads   | 256     | RLIMIT_NPROC in the sandbox's user namespace (the fallback: of its  |
|                         |         | own uid); a cgroup when root                                        |
| one file written        | 256 MB  | RLIMIT_FSIZE                                                        |
| scratch space           | 512 MB  | the sandbox's only writable places, tmpfs of fixed size: home 1/2   |
|                         |         | (256 MB), /tmp 3/8 (192 MB), /dev/shm 1/8 (64 MB); / is read-only   |
| output of one cell      | 2 MB    | the runner drops the rest as it arrives                             |

Why the two wall-time limits stretch: wall time depends on the machine as much as on the submission, and on
a busy grader an honest cell can take several times its usual time. So before any student code runs, the
runner times a fixed workload (``measure_load_factor``); its ratio to the time on an idle reference machine,
clamped to [1, ``max_load_factor``], multiplies both wall-time limits for that run: a limit is only ever
raised, never lowered below the instructor's value. A run that still hits a time limit is run once more with
both limits doubled (``RETRY_TIME_SCALE``) before its result counts (autograde.py). CPU time is not scaled:
load does not change how much CPU a cell needs.

Why a cgroup when the grader runs as root: Linux does not apply RLIMIT_NPROC to processes whose real user is
root, and inside bubblewrap's user namespace the sandbox still *is* root on the host. A fork bomb would then
go unchecked, so as root the sandbox also gets its own cgroup with ``pids.max`` and a memory cap for all its
processes together (cgroups.py). As an ordinary user RLIMIT_NPROC works and no cgroup is needed. Nor in the
fallback sandbox: there the kernel runs as an unprivileged uid of its own, which RLIMIT_NPROC binds; a cgroup
is still used where one can be made.

Why the scratch space is split, not given to each tmpfs whole: tmpfs pages are memory, and without a cgroup
(the ordinary-user case) nothing else caps them, so the total one sandbox can pin must stay at the limit.
Home holds the submission's copy and what the notebook writes; /tmp the caches (matplotlib, IPython,
TorchInductor); /dev/shm only shared-memory segments (e.g. DataLoader workers), and at the default its 64 MB
are Docker's default ``--shm-size``. The fallback sandbox (no namespaces, fallback.py) has no tmpfs of its own:
there only RLIMIT_FSIZE bounds each file, and what the kernel leaves is removed after its run.

Why RLIMIT_DATA and not RLIMIT_AS: a CUDA build of PyTorch maps several GB of shared libraries (cuBLAS, cuDNN, ...)
just to import, so an address-space cap fails ``import torch`` ("failed to map segment from shared object")
before a learner's code runs. RLIMIT_DATA (Linux >= 4.7) counts private writable memory — every heap and
anonymous allocation, where a memory bomb lives — and not read-only library text.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

GB = 1024**3
MB = 1024**2

# The calibration workload: CALIBRATION_ROUNDS rounds of pure-Python arithmetic, about 0.2 s on an idle
# reference machine (one core of a 2-core cloud VM, Python 3.11). A faster machine gets factor 1.
CALIBRATION_ROUNDS = 10
CALIBRATION_ROUND_SIZE = 200_000
CALIBRATION_REFERENCE_S = 0.2
RETRY_TIME_SCALE = 2


@dataclass(frozen=True)
class Limits:
    cell_timeout_s: int = 120
    notebook_timeout_s: int = 900
    memory_bytes: int = 4 * GB
    cpu_seconds: int = 600
    max_processes: int = 256
    max_file_bytes: int = 256 * MB
    scratch_bytes: int = 512 * MB
    max_cell_output_bytes: int = 2 * MB
    max_load_factor: float = 4.0  # how far a busy machine may stretch the wall-time limits; 1 turns it off

    def kernel_rlimits(self, *, count_processes: bool) -> dict[str, int]:
        """Resource limits the kernel launcher applies to itself (``resource.RLIMIT_*`` names → values).

        ``count_processes`` is False outside a user namespace: there RLIMIT_NPROC would count every process of
        the instructor's account, not just the sandbox's.
        """
        limits = {
            "RLIMIT_DATA": self.memory_bytes,
            "RLIMIT_CPU": self.cpu_seconds,
            "RLIMIT_FSIZE": self.max_file_bytes,
            "RLIMIT_CORE": 0,
        }
        if count_processes:
            limits["RLIMIT_NPROC"] = self.max_processes
        return limits

    @property
    def scratch_split(self) -> dict[str, int]:
        """Sizes of the sandbox's writable tmpfs (bwrap.py); they add up to ``scratch_bytes``."""
        shm = self.scratch_bytes // 8
        home = self.scratch_bytes // 2
        return {"home": home, "tmp": self.scratch_bytes - home - shm, "shm": shm}

    @property
    def cgroup_memory_bytes(self) -> int:
        """Memory for every process of a sandbox together: the kernel, the runner, and the tmpfs."""
        return self.memory_bytes + self.scratch_bytes + 512 * MB


def scaled_seconds(seconds: float, factor: float) -> int:
    """A wall-time limit stretched by ``factor``, in whole seconds (nbclient takes an integer timeout)."""
    return math.ceil(seconds * factor)


def load_factor(seconds: float, max_factor: float) -> float:
    """How much slower than the reference the calibration ran, clamped to [1, max_factor], 2 decimals."""
    return round(min(max(seconds / CALIBRATION_REFERENCE_S, 1.0), max(max_factor, 1.0)), 2)


def _calibration_round() -> int:
    total = 0
    for i in range(CALIBRATION_ROUND_SIZE):
        total = (total + i * i) % 1_000_003
    return total


def measure_load_factor(max_factor: float) -> float:
    """Time the calibration workload here and now; stops early once it is past the clamp anyway."""
    if max_factor <= 1:
        return 1.0
    budget = CALIBRATION_REFERENCE_S * max_factor
    started, done, elapsed = time.perf_counter(), 0, 0.0
    while done < CALIBRATION_ROUNDS and elapsed <= budget:
        _calibration_round()
        done += 1
        elapsed = time.perf_counter() - started
    return load_factor(elapsed * CALIBRATION_ROUNDS / done, max_factor)
