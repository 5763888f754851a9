"""Benchmark harness on ``torch.utils.benchmark``: warm-up, device sync, medians, achieved FLOP/s and bytes/s.

``measure`` times one callable and returns a ``BenchResult`` (median, IQR, counted work → rates); ``sweep``
runs a factory over parameter sets into a pandas DataFrame; ``compare`` builds a torch ``Compare`` table;
``measure_peaks`` measures this machine's own roofline (a big GEMM for compute, a big copy for bandwidth);
``measure_gemm_peaks`` the GEMM peak of several dtypes (fp32 CUDA cores vs 16-bit tensor cores).
``naive_time`` is the *wrong* way (no warm-up, no sync, one mean), kept for Lab 1 to contrast with.

Only measurement lives here: no vendor numbers (those are in the catalog).
"""
from __future__ import annotations

import contextlib
import dataclasses
import math
import numbers
import os
import platform
import sys
import time
import timeit
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import torch
import torch.utils.benchmark as tbench

from common.errors import DFAError

__all__ = [
    "BenchResult", "MeasuredPeaks", "compare", "device_name", "machine_info", "measure", "measure_gemm_peaks",
    "measure_peaks", "naive_time", "sweep", "to_frame",
]

_DEVICE_TYPES = ("cpu", "cuda")


@dataclass(frozen=True)
class BenchResult:
    """One timed workload. Times are seconds per call; ``flops``/``bytes`` are counted work per call."""

    label: str
    sub_label: str | None
    description: str | None
    device: str
    dtype: str | None
    median_s: float
    iqr_s: float  # p75 - p25 of the per-call times (linear interpolation, as torch's Measurement)
    mean_s: float
    n_runs: int  # timed measurements (blocks); each block ran ``number_per_run`` calls
    number_per_run: int = 1
    num_threads: int = 1
    flops: float | None = None
    bytes: float | None = None
    raw: tbench.Measurement | None = field(default=None, repr=False, compare=False)

    @property
    def flops_per_s(self) -> float | None:
        """Achieved FLOP/s = flops / median_s."""
        return None if self.flops is None else self.flops / self.median_s

    @property
    def bytes_per_s(self) -> float | None:
        """Achieved bytes/s = bytes / median_s."""
        return None if self.bytes is None else self.bytes / self.median_s

    @property
    def intensity(self) -> float | None:
        """Arithmetic intensity, FLOP/byte = flops / bytes."""
        if self.flops is None or not self.bytes:
            return None
        return self.flops / self.bytes

    def as_row(self) -> dict[str, Any]:
        """All fields except ``raw``, plus flops_per_s, bytes_per_s and intensity."""
        row = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "raw"}
        row.update(flops_per_s=self.flops_per_s, bytes_per_s=self.bytes_per_s, intensity=self.intensity)
        return row


def _device(device: str | torch.device | None) -> torch.device:
    """Parse and check a device; only CPU and CUDA are timed (others need their own sync)."""
    valid = ["cpu", "cuda", "cuda:N"]
    if isinstance(device, torch.device):
        dev = device
    else:
        try:
            dev = torch.device("cpu" if device is None else device)
        except (RuntimeError, TypeError):
            raise DFAError(f"unknown device {device!r}; valid: {', '.join(valid)}") from None
    if dev.type not in _DEVICE_TYPES:
        raise DFAError(f"unknown device {str(device)!r}; valid: {', '.join(valid)}")
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise DFAError(f"device {str(device)!r} is not available: torch sees no CUDA device")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            count = torch.cuda.device_count()
            raise DFAError(f"device {str(device)!r} is not available: {count} CUDA device(s)")
    return dev


def _sync(dev: torch.device) -> None:
    # torch.cuda.synchronize(dev) waits for every stream on that device, so async work a user function
    # launched (even on its own side stream) is finished before we read the clock.
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def _tensors(*objs: Any) -> Iterator[torch.Tensor]:
    for obj in objs:
        if isinstance(obj, torch.Tensor):
            yield obj
        elif isinstance(obj, torch.nn.Module):
            yield from obj.parameters()
            yield from obj.buffers()
        elif isinstance(obj, (list, tuple)):
            yield from _tensors(*obj)
        elif isinstance(obj, Mapping):
            yield from _tensors(*obj.values())


def _positive(name: str, value: float | None, *, allow_zero: bool = False) -> None:
    if value is None:
        return
    bad = isinstance(value, bool) or not isinstance(value, numbers.Real) or math.isnan(value)
    if bad or value < 0 or (value == 0 and not allow_zero):
        raise DFAError(f"{name} must be a number {'>= 0' if allow_zero else '> 0'}, got {value!r}")


def _int(name: str, value: Any, lo: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < lo:
        raise DFAError(f"{name} must be an int >= {lo}, got {value!r}")
    return int(value)


@contextlib.contextmanager
def _threads(n: int) -> Iterator[None]:
    # Warm-up must run on the same thread pool as the timed loop (Timer sets it only around its own loop).
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def measure(
    fn: Callable[..., Any],
    *args: Any,
    label: str | None = None,
    sub_label: str | None = None,
    description: str | None = None,
    flops: float | None = None,
    bytes: float | None = None,  # noqa: A002 - the natural name next to ``flops``
    device: str | torch.device | None = None,
    warmup: int = 3,
    min_run_time: float = 0.2,
    num_threads: int | None = None,
    timer: Callable[[], float] | None = None,
    **kwargs: Any,
) -> BenchResult:
    """Time ``fn(*args, **kwargs)`` with ``Timer.blocked_autorange`` after ``warmup`` synced calls.

    ``device``/dtype default to those of the first tensor in args, kwargs or ``fn``'s parameters (else CPU).
    ``timer`` replaces the wall clock (tests inject a fake one); on CUDA we sync the device before every read
    of whichever clock is used, so block time = launch + finish of all calls in the block.
    """
    found = list(_tensors(fn, args, kwargs))
    dev = _device(device if device is not None else (found[0].device if found else "cpu"))
    floats = [t.dtype for t in found if t.is_floating_point() or t.is_complex()]
    dtype = str(floats[0] if floats else (found[0].dtype if found else "")).removeprefix("torch.") or None
    _positive("flops", flops, allow_zero=True)
    _positive("bytes", bytes, allow_zero=True)
    _positive("min_run_time", min_run_time)
    warmup = _int("warmup", warmup, 0)
    threads = torch.get_num_threads() if num_threads is None else _int("num_threads", num_threads, 1)
    name = label or getattr(fn, "__name__", None) or type(fn).__name__

    # torch's default timer syncs only the *current* accelerator (torch >= 2.5) or current CUDA device (2.4),
    # and a custom timer syncs nothing; so we always use our own clock that syncs the measured device.
    base = timer or timeit.default_timer

    def clock() -> float:
        _sync(dev)
        return base()

    with _threads(threads):
        for _ in range(warmup):  # lazy init, allocator caches, cuBLAS handles, autotuning...
            fn(*args, **kwargs)
        _sync(dev)  # nothing from warm-up may still be queued when the first block starts
    t = tbench.Timer(
        stmt="fn(*args, **kwargs)",
        globals={"fn": fn, "args": args, "kwargs": kwargs},
        timer=clock,
        label=name,
        sub_label=sub_label or name,
        description=description,
        num_threads=threads,
    )
    m = t.blocked_autorange(min_run_time=min_run_time)
    return BenchResult(
        label=name, sub_label=sub_label, description=description, device=str(dev), dtype=dtype,
        median_s=m.median, iqr_s=m.iqr, mean_s=m.mean, n_runs=len(m.times), number_per_run=m.number_per_run,
        num_threads=threads, flops=flops, bytes=bytes, raw=m,
    )


def to_frame(results: Iterable[BenchResult]) -> pd.DataFrame:
    """One row per result (``BenchResult.as_row``)."""
    return pd.DataFrame([r.as_row() for r in results])


def compare(results: Iterable[BenchResult | tbench.Measurement], *, trim: bool = True,
            colorize: bool = False) -> tbench.Compare:
    """A printable ``torch.utils.benchmark.Compare``: rows = sub_label, columns = description, per label."""
    ms = [r.raw if isinstance(r, BenchResult) else r for r in results]
    if not ms or any(m is None for m in ms):
        raise DFAError("compare needs at least one result, each from measure() (with its raw Measurement)")
    table = tbench.Compare(ms)
    if trim:
        table.trim_significant_figures()
    if colorize:
        table.colorize()
    return table


def sweep(
    fn_factory: Callable[..., Any],
    params: Iterable[Mapping[str, Any]],
    *,
    progress: bool = True,
    return_results: bool = False,
    **measure_kwargs: Any,
) -> pd.DataFrame | tuple[pd.DataFrame, list[BenchResult]]:
    """Measure ``fn_factory(**p)`` for each ``p`` in ``params``; one DataFrame row per ``p``.

    The factory returns a callable (timed with no arguments) or a dict of ``measure`` arguments with the
    callable under ``"fn"``, positional ones under ``"args"``: ``{"fn": f, "args": (x,), "flops": 2*n**3}``.
    Columns: the parameters first (they win over result fields of the same name), then ``as_row()``.
    The description defaults to ``"k=v, ..."`` so ``compare`` puts parameter sets in columns.
    """
    from tqdm.auto import tqdm

    params = list(params)
    rows, results = [], []
    for p in tqdm(params, desc=measure_kwargs.get("label") or "sweep", disable=not progress):
        spec = fn_factory(**p)
        spec = dict(spec) if isinstance(spec, Mapping) else {"fn": spec}
        if not callable(spec.get("fn")):
            raise DFAError(f"sweep factory must return a callable or a dict with 'fn'; got {spec!r} for {p}")
        kw = {**measure_kwargs, **spec}
        kw.setdefault("description", ", ".join(f"{k}={v}" for k, v in p.items()))
        fn, args = kw.pop("fn"), tuple(kw.pop("args", ()))
        r = measure(fn, *args, **kw)
        results.append(r)
        rows.append({**p, **{k: v for k, v in r.as_row().items() if k not in p}})
    df = pd.DataFrame(rows)
    return (df, results) if return_results else df


def naive_time(fn: Callable[[], Any], n: int = 10) -> float:
    """Mean seconds per call of ``fn()`` over ``n`` back-to-back calls: deliberately naive.

    No warm-up (the first call pays lazy init), no device sync (on CUDA it times kernel *launches*, not
    kernels), one mean and no spread. Lab 1 contrasts it with ``measure``; don't use it for real numbers.
    """
    n = _int("n", n, 1)
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n


def device_name(device: str | torch.device = "cpu") -> str:
    """Human name: the CPU model (from /proc/cpuinfo, else platform) or the CUDA device name."""
    dev = _device(device)
    if dev.type == "cuda":
        return torch.cuda.get_device_name(dev)
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.lower().startswith(("model name", "hardware", "cpu model")):
                    return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine() or "unknown CPU"


def machine_info() -> dict[str, Any]:
    """What a benchmark or figure should say it was "measured on"."""
    cuda = torch.cuda.is_available()
    return {
        "cpu": device_name("cpu"),
        "cores": os.cpu_count(),
        "num_threads": torch.get_num_threads(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "cuda": torch.cuda.get_device_name(0) if cuda else None,
        "cuda_version": torch.version.cuda if cuda else None,
    }


@dataclass(frozen=True)
class MeasuredPeaks:
    """This machine's measured roofline: compute roof from a GEMM, bandwidth roof from a copy."""

    device: str
    device_name: str
    dtype: str
    flops_per_s: float  # 2*N^3 / median GEMM time
    bytes_per_s: float  # 2*copy_bytes (read + write) / median copy time
    gemm_n: int
    copy_bytes: int  # size of the source tensor; each copy moves twice this
    gemm: BenchResult = field(repr=False)
    copy: BenchResult = field(repr=False)

    @property
    def ridge_intensity(self) -> float:
        """Ridge point, FLOP/byte = flops_per_s / bytes_per_s: kernels below it are bandwidth-bound."""
        return self.flops_per_s / self.bytes_per_s


def measure_peaks(
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
    gemm_n: int | None = None,
    copy_bytes: int | None = None,
    min_run_time: float = 0.5,
    warmup: int = 2,
) -> MeasuredPeaks:
    """Measure achievable FLOP/s (N×N @ N×N GEMM, 2*N^3 FLOPs) and bytes/s (dst.copy_(src), 2*nbytes).

    The GEMM's ``bytes`` is its compulsory traffic 3*N^2*itemsize (read A, B; write C).
    Defaults: CPU N=1024 (2048 above 4 threads) and a 256 MiB copy (≈2-4 s on 2 cores); CUDA N=8192 and a
    1 GiB copy. On CUDA fp32 the result follows ``torch.backends.cuda.matmul.allow_tf32`` (off by default,
    so true FP32).
    """
    dev = _device(device)
    if not isinstance(dtype, torch.dtype):
        raise DFAError(f"dtype must be a torch.dtype, got {dtype!r}")
    cuda = dev.type == "cuda"
    n = gemm_n if gemm_n is not None else _default_gemm_n(dev)
    # The copy must be far bigger than the last-level cache (tens of MiB on CPUs, up to ~100 MiB L2 on GPUs),
    # otherwise it measures cache bandwidth, not DRAM/HBM: src + dst together touch 2x this.
    nbytes = copy_bytes if copy_bytes is not None else (1 << 30 if cuda else 256 << 20)
    n, nbytes, warmup = _int("gemm_n", n, 1), _int("copy_bytes", nbytes, 1), _int("warmup", warmup, 0)
    _positive("min_run_time", min_run_time)
    itemsize = torch.empty((), dtype=dtype).element_size()
    numel = nbytes // itemsize
    if numel < 1:
        raise DFAError(f"copy_bytes={nbytes} is smaller than one {dtype} element ({itemsize} bytes)")

    tag = str(dtype).removeprefix("torch.")
    gemm = _gemm(dev, dtype, n, min_run_time, warmup)
    src = torch.ones(numel, device=dev, dtype=dtype)  # ones, not empty: first touch happens here, not timed
    dst = torch.zeros_like(src)
    copy = measure(dst.copy_, src, label="measured peaks", sub_label=f"copy {numel * itemsize / 2**20:g} MiB",
                   description=tag, flops=0, bytes=2 * numel * itemsize, device=dev, warmup=warmup,
                   min_run_time=min_run_time)
    del src, dst
    return MeasuredPeaks(
        device=str(dev), device_name=device_name(dev), dtype=tag, flops_per_s=gemm.flops_per_s,
        bytes_per_s=copy.bytes_per_s, gemm_n=n, copy_bytes=numel * itemsize, gemm=gemm, copy=copy,
    )


def _default_gemm_n(dev: torch.device) -> int:
    # A few CPU cores saturate on N=1024 in ~10-50 ms a call; more cores need more work per call to fill up.
    return 8192 if dev.type == "cuda" else 1024 if torch.get_num_threads() <= 4 else 2048


def _gemm(dev: torch.device, dtype: torch.dtype, n: int, min_run_time: float, warmup: int) -> BenchResult:
    """One N x N @ N x N GEMM timed: 2*N^3 FLOPs, compulsory bytes 3*N^2*itemsize (read A, B; write C)."""
    itemsize = torch.empty((), dtype=dtype).element_size()
    a = torch.randn(n, n, device=dev).to(dtype)
    b = torch.randn(n, n, device=dev).to(dtype)
    c = torch.empty(n, n, device=dev, dtype=dtype)  # out= keeps allocation out of the timed loop
    tag = str(dtype).removeprefix("torch.")
    return measure(torch.mm, a, b, out=c, label="measured peaks", sub_label=f"gemm N={n}", description=tag,
                   flops=2 * n**3, bytes=3 * n * n * itemsize, device=dev, warmup=warmup, min_run_time=min_run_time)


def measure_gemm_peaks(
    device: str | torch.device = "cpu",
    dtypes: Iterable[torch.dtype] = (torch.float32, torch.float16, torch.bfloat16),
    gemm_n: int | None = None,
    min_run_time: float = 0.5,
    warmup: int = 2,
) -> dict[str, BenchResult | str]:
    """GEMM FLOP/s per dtype: {'float16': BenchResult, 'bfloat16': 'skipped: <why>'}. On a GPU the 16-bit
    GEMMs run on the tensor cores (a T4: fp16 only, bf16 is emulated); a dtype whose matmul this device or
    torch build cannot run (a tiny matmul raises) is skipped with the reason, never guessed."""
    dev = _device(device)
    n = _int("gemm_n", gemm_n if gemm_n is not None else _default_gemm_n(dev), 1)
    _positive("min_run_time", min_run_time)
    warmup = _int("warmup", warmup, 0)
    out: dict[str, BenchResult | str] = {}
    for dtype in dtypes:
        if not isinstance(dtype, torch.dtype):
            raise DFAError(f"dtypes must be torch.dtypes, got {dtype!r}")
        tag = str(dtype).removeprefix("torch.")
        try:  # a 2x2 probe: an unsupported matmul fails here in microseconds, not after a warm-up
            torch.mm(torch.ones(2, 2, device=dev, dtype=dtype), torch.ones(2, 2, device=dev, dtype=dtype))
        except (RuntimeError, NotImplementedError) as exc:
            out[tag] = f"skipped: {tag} matmul does not run on {dev} ({str(exc).splitlines()[0][:120]})"
            continue
        out[tag] = _gemm(dev, dtype, n, min_run_time, warmup)
    return out
