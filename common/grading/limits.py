"""How much one submission may use while it is graded, and how each limit is enforced.

| limit                   | default | enforced by                                                        |
| ----------------------- | ------- | ------------------------------------------------------------------ |
| wall time per cell      | 120 s   | nbclient interrupts the kernel; a kernel that ignores it is stopped |
| wall time per notebook  | 15 min  | the parent kills the whole sandbox                                  |
| memory (data segment)   | 4 GB    | RLIMIT_DATA on the kernel (MemoryError); plus a cgroup when root    |
| CPU time of the kernel  | 10 min  | RLIMIT_CPU (the kernel is killed, later cells count as not run)     |
| processes and threads   | 256     | RLIMIT_NPROC in the sandbox's user namespace; a cgroup when root    |
| one file written        | 256 MB  | RLIMIT_FSIZE                                                        |
| scratch space           | 512 MB  | size of the tmpfs mounted on the sandbox's home and /tmp            |
| output of one cell      | 2 MB    | the runner drops the rest as it arrives                             |

Why a cgroup when the grader runs as root: Linux does not apply RLIMIT_NPROC to processes whose real user is
root, and inside bubblewrap's user namespace the sandbox still *is* root on the host. A fork bomb would then
go unchecked, so as root the sandbox also gets its own cgroup with ``pids.max`` and a memory cap for all its
processes together (cgroups.py). As an ordinary user RLIMIT_NPROC works and no cgroup is needed.

Why RLIMIT_DATA and not RLIMIT_AS: a CUDA build of PyTorch maps several GB of shared libraries (cuBLAS, cuDNN, ...)
just to import, so an address-space cap fails ``import torch`` ("failed to map segment from shared object")
before a learner's code runs. RLIMIT_DATA (Linux >= 4.7) counts private writable memory — every heap and
anonymous allocation, where a memory bomb lives — and not read-only library text.
"""

from __future__ import annotations

from dataclasses import dataclass

GB = 1024**3
MB = 1024**2


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
    def cgroup_memory_bytes(self) -> int:
        """Memory for every process of a sandbox together: the kernel, the runner, and the two tmpfs."""
        return self.memory_bytes + 2 * self.scratch_bytes + 512 * MB
