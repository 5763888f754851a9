"""Tests for common.measure.bench: exact statistics from a fake clock, counted work, sweeps, peaks, bad input."""
from __future__ import annotations

import math

import pandas as pd
import pytest
import torch
import torch.utils.benchmark as tbench

from common.errors import DFAError
from common.measure import bench

U = 2.0**-8  # one fake time unit: a power of two, so every sum and quantile below is exact in floating point
CYCLE = (1, 2, 3, 5)  # per-call durations in units, repeated forever


class FakeClock:
    """Each call of ``work`` advances time by the next duration of CYCLE; ``now`` reads the time."""

    def __init__(self) -> None:
        self.t = 0.0
        self.calls = 0
        self.calls_at_first_read: int | None = None

    def work(self) -> None:
        self.t += CYCLE[self.calls % len(CYCLE)] * U
        self.calls += 1

    def now(self) -> float:
        if self.calls_at_first_read is None:
            self.calls_at_first_read = self.calls
        return self.t


def fake_measure(**kw):
    clock = FakeClock()
    # min_run_time = two whole cycles (22 units): blocked_autorange keeps measuring until the total reaches
    # it, which with one call per block is exactly 8 calls - and any 8 consecutive calls of the cycle hold
    # each duration twice, whatever torch's own block-size probe consumed first.
    r = bench.measure(clock.work, timer=clock.now, min_run_time=2 * sum(CYCLE) * U, **kw)
    return r, clock


def test_fake_clock_statistics_are_exact():
    r, clock = fake_measure(label="fake", flops=1e6, bytes=2e5)
    # Per-call times sorted: 1 1 2 2 3 3 5 5 (units). Linear-interpolation quantiles over 8 points:
    # median at rank 3.5 -> (2+3)/2 = 2.5; p25 at rank 1.75 -> 1 + 0.75*(2-1) = 1.75;
    # p75 at rank 5.25 -> 3 + 0.25*(5-3) = 3.5; IQR = 1.75; mean = 22/8.
    assert r.n_runs == 8
    assert r.number_per_run == 1
    assert r.median_s == 2.5 * U
    assert r.iqr_s == (3.5 - 1.75) * U
    assert r.mean_s == 22 / 8 * U
    assert r.flops_per_s == 1e6 / (2.5 * U)
    assert r.bytes_per_s == 2e5 / (2.5 * U)
    assert r.intensity == 5.0
    assert isinstance(r.raw, tbench.Measurement) and r.raw.median == r.median_s


def test_warmup_runs_before_the_first_clock_read():
    _, clock = fake_measure(warmup=5)
    assert clock.calls_at_first_read == 5
    _, clock = fake_measure(warmup=0)
    assert clock.calls_at_first_read == 0


def _logged(log: list, clock: FakeClock):
    """(work, now) for bench.measure that record each call and each clock read in ``log``, in order."""

    def work():
        log.append("call")
        clock.work()

    def now():
        log.append("clock")
        return clock.now()

    return work, now


def test_device_is_synchronised_after_warmup_and_before_every_clock_read(monkeypatch):
    log: list[str] = []
    monkeypatch.setattr(bench, "_sync", lambda dev: log.append("sync"))
    clock = FakeClock()

    work, now = _logged(log, clock)
    bench.measure(work, timer=now, warmup=2, min_run_time=2 * sum(CYCLE) * U)
    assert log[:3] == ["call", "call", "sync"]
    clocks = [i for i, e in enumerate(log) if e == "clock"]
    assert len(clocks) >= 2 * 8
    assert all(log[i - 1] == "sync" for i in clocks)


def test_result_row_and_frame():
    r, _ = fake_measure(label="fake", sub_label="row", description="col", flops=10.0)
    row = r.as_row()
    assert "raw" not in row
    assert row["label"] == "fake" and row["sub_label"] == "row" and row["description"] == "col"
    assert row["flops_per_s"] == 10.0 / (2.5 * U)
    assert row["bytes_per_s"] is None and row["intensity"] is None
    df = bench.to_frame([r, r])
    assert len(df) == 2 and {"median_s", "iqr_s", "flops_per_s", "n_runs"} <= set(df.columns)
    assert "raw" not in repr(r)


def test_measure_real_matmul_is_positive_and_sane():
    n = 64
    a, b = torch.randn(n, n), torch.randn(n, n)
    r = bench.measure(torch.mm, a, b, flops=2 * n**3, bytes=3 * n * n * 4, min_run_time=0.05, num_threads=1)
    assert r.device == "cpu" and r.dtype == "float32" and r.num_threads == 1
    assert r.label == "mm"
    assert r.n_runs >= 1 and r.number_per_run >= 1
    assert 0 < r.median_s < 1.0 and r.iqr_s >= 0 and r.mean_s > 0
    assert math.isclose(r.flops_per_s, 2 * n**3 / r.median_s)
    assert 1e3 < r.flops_per_s < 1e16  # loose: any real machine lands in between
    assert r.intensity == pytest.approx(2 * n**3 / (3 * n * n * 4))


def test_measure_keeps_thread_count_and_passes_kwargs():
    before = torch.get_num_threads()
    out = torch.empty(4, 4)
    x = torch.ones(4, 4)
    r = bench.measure(torch.add, x, x, out=out, min_run_time=0.01, num_threads=1)
    assert torch.get_num_threads() == before
    assert torch.equal(out, torch.full((4, 4), 2.0))
    assert r.num_threads == 1


def test_sweep_rows_columns_and_compare():
    def factory(n):
        a = torch.randn(n, n)
        return {"fn": torch.mm, "args": (a, a), "flops": 2 * n**3, "label": "matmul"}

    df, results = bench.sweep(factory, [{"n": 8}, {"n": 16}, {"n": 32}], progress=False, min_run_time=0.01,
                              return_results=True)
    assert isinstance(df, pd.DataFrame) and len(df) == 3
    assert list(df.columns[:1]) == ["n"]
    assert {"label", "median_s", "iqr_s", "flops", "flops_per_s", "n_runs"} <= set(df.columns)
    assert df["n"].tolist() == [8, 16, 32]
    assert df["flops"].tolist() == [2 * 8**3, 2 * 16**3, 2 * 32**3]
    assert df["description"].tolist() == ["n=8", "n=16", "n=32"]
    assert (df["flops_per_s"] == df["flops"] / df["median_s"]).all()
    table = str(bench.compare(results))
    assert "matmul" in table and "n=8" in table and "n=32" in table


def test_sweep_plain_callable_and_progress_bar():
    df = bench.sweep(lambda k: (lambda: sum(range(k))), [{"k": 10}, {"k": 100}], progress=True,
                     min_run_time=0.01)
    assert df.shape[0] == 2 and df["k"].tolist() == [10, 100] and (df["median_s"] > 0).all()


def test_naive_time_calls_n_times():
    calls = []
    t = bench.naive_time(lambda: calls.append(1), 7)
    assert len(calls) == 7 and t >= 0


def test_measure_peaks_tiny_sizes_count_work_exactly():
    n, nbytes = 32, 4096 + 3  # 3 stray bytes: rounded down to whole float32 elements
    p = bench.measure_peaks("cpu", torch.float32, gemm_n=n, copy_bytes=nbytes, min_run_time=0.02, warmup=1)
    assert p.gemm_n == n and p.copy_bytes == 4096
    assert p.gemm.flops == 2 * n**3
    assert p.copy.bytes == 2 * 4096
    assert p.flops_per_s == p.gemm.flops / p.gemm.median_s > 0
    assert p.bytes_per_s == p.copy.bytes / p.copy.median_s > 0
    assert p.ridge_intensity == p.flops_per_s / p.bytes_per_s
    assert p.device == "cpu" and p.dtype == "float32" and p.device_name
    assert "measured peaks" in str(bench.compare([p.gemm, p.copy]))


def test_measure_gemm_peaks_per_dtype_and_skips_what_cannot_run(monkeypatch):
    mm = torch.mm

    def no_bf16(a, b, **kw):  # a torch build whose CPU has no bf16 matmul
        if a.dtype == torch.bfloat16:
            raise RuntimeError("\"addmm_impl_cpu_\" not implemented for 'BFloat16'")
        return mm(a, b, **kw)

    monkeypatch.setattr(torch, "mm", no_bf16)
    out = bench.measure_gemm_peaks("cpu", (torch.float32, torch.bfloat16), gemm_n=16, min_run_time=0.01, warmup=0)
    assert list(out) == ["float32", "bfloat16"]
    assert out["float32"].flops == 2 * 16**3 and out["float32"].flops_per_s > 0
    assert out["bfloat16"].startswith("skipped: bfloat16 matmul does not run on cpu") and "BFloat16" in out["bfloat16"]
    with pytest.raises(DFAError, match="torch.dtypes"):
        bench.measure_gemm_peaks("cpu", ("fp16",), gemm_n=8)


def test_machine_info_and_device_name():
    info = bench.machine_info()
    assert {"cpu", "cores", "torch", "python", "cuda", "num_threads"} <= set(info)
    assert info["torch"] == torch.__version__ and info["num_threads"] == torch.get_num_threads()
    assert isinstance(bench.device_name("cpu"), str) and bench.device_name("cpu")


@pytest.mark.parametrize(
    "call, fragment",
    [
        (lambda: bench.measure(lambda: None, device="tpu"), "'tpu'"),
        (lambda: bench.measure(lambda: None, device="not a device"), "'not a device'"),
        (lambda: bench.measure(lambda: None, min_run_time=0), "min_run_time"),
        (lambda: bench.measure(lambda: None, warmup=-1), "warmup"),
        (lambda: bench.measure(lambda: None, num_threads=0), "num_threads"),
        (lambda: bench.measure(lambda: None, flops=-5), "-5"),
        (lambda: bench.measure_peaks(gemm_n=0), "gemm_n"),
        (lambda: bench.measure_peaks(copy_bytes=-1), "copy_bytes"),
        (lambda: bench.measure_peaks(gemm_n=8, copy_bytes=2), "copy_bytes=2"),
        (lambda: bench.measure_peaks(device="quantum"), "'quantum'"),
        (lambda: bench.naive_time(lambda: None, 0), "n must be"),
        (lambda: bench.device_name("nope"), "'nope'"),
        (lambda: bench.compare([]), "compare"),
        (lambda: bench.sweep(lambda n: 3, [{"n": 1}], progress=False), "factory"),
    ],
)
def test_bad_input_raises_dfaerror(call, fragment):
    with pytest.raises(DFAError) as exc:
        call()
    assert fragment in str(exc.value) and "\n" not in str(exc.value)


@pytest.mark.skipif(torch.cuda.is_available(), reason="only meaningful without CUDA")
def test_cuda_requested_without_cuda_is_a_dfaerror():
    with pytest.raises(DFAError, match="'cuda'"):
        bench.measure(lambda: None, device="cuda")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_measure_and_peaks():
    n = 512
    a = torch.randn(n, n, device="cuda")
    r = bench.measure(torch.mm, a, a, flops=2 * n**3, min_run_time=0.05)
    assert r.device.startswith("cuda") and r.median_s > 0
    p = bench.measure_peaks("cuda", gemm_n=1024, copy_bytes=64 << 20, min_run_time=0.05)
    assert p.gemm.flops == 2 * 1024**3 and p.copy.bytes == 2 * (64 << 20) and p.bytes_per_s > 0


# ---- the CUDA path against a faked torch.cuda (no GPU needed) ---
@pytest.fixture
def fake_cuda(monkeypatch):
    """torch sees two CUDA devices; ``torch.cuda.synchronize`` logs the device it is asked to wait for."""
    log: list = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda d=None: "Tesla T4")
    monkeypatch.setattr(torch.cuda, "synchronize", lambda d=None: log.append(("sync", d)))
    monkeypatch.setattr(torch.version, "cuda", "12.4")
    return log


def test_measure_on_cuda_synchronizes_the_measured_device_before_every_clock_read(fake_cuda):
    """CUDA kernels run asynchronously: without ``torch.cuda.synchronize`` the clock would time launches only.
    Warm-up is drained before the first read, and every read waits for the device measured (cuda:1 here,
    not the current device)."""
    log = fake_cuda
    clock = FakeClock()

    work, now = _logged(log, clock)
    r = bench.measure(work, device="cuda:1", timer=now, warmup=2, min_run_time=2 * sum(CYCLE) * U)
    assert r.device == "cuda:1" and r.n_runs == 8 and r.median_s == 2.5 * U
    assert log[:3] == ["call", "call", ("sync", torch.device("cuda:1"))]
    clocks = [i for i, e in enumerate(log) if e == "clock"]
    assert len(clocks) >= 2 * 8 and all(log[i - 1] == ("sync", torch.device("cuda:1")) for i in clocks)
    assert {e for e in log if e not in ("call", "clock")} == {("sync", torch.device("cuda:1"))}


def test_measure_on_the_cpu_never_synchronizes_cuda(fake_cuda):
    r, _ = fake_measure()
    assert r.device == "cpu" and fake_cuda == []


def test_naive_time_never_synchronizes(fake_cuda):
    """Lab 1's contrast: the naive timer reads the clock around launches, so on a GPU it misses the kernels."""
    calls = []
    bench.naive_time(lambda: calls.append(1), 4)
    assert calls == [1] * 4 and fake_cuda == []


def test_device_name_and_machine_info_on_a_faked_gpu(fake_cuda):
    assert bench.device_name("cuda") == bench.device_name("cuda:1") == "Tesla T4"
    info = bench.machine_info()
    assert (info["cuda"], info["cuda_version"]) == ("Tesla T4", "12.4")
    with pytest.raises(DFAError, match=r"'cuda:2' is not available: 2 CUDA device\(s\)"):
        bench.measure(lambda: None, device="cuda:2")
