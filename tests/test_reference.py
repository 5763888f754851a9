"""Reference measurements: the recording script on this CPU, its CUDA branch against a faked torch.cuda, and
common.measure.reference reading them back (tables, provenance, roofline, simulated vs measured)."""
import importlib.util
import json
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from torch.profiler import ProfilerActivity

from common.errors import DFAError
from common.measure import bench, reference

ROOT = Path(__file__).resolve().parents[1]
SPEC = importlib.util.spec_from_file_location("record", ROOT / "benchmarks" / "reference" / "record.py")
record = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(record)


@pytest.fixture(scope="module")
def cpu_doc(tmp_path_factory) -> dict:
    """One quick recording on this CPU (real measurements, tiny sizes), written as the script writes it."""
    out = tmp_path_factory.mktemp("ref") / "cpu-quick.json"
    assert record.main(["--device", "cpu", "--quick", "--out", str(out)]) == 0
    return json.loads(out.read_text(encoding="utf-8"))


@pytest.fixture
def ref_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("DFA_REFERENCE_DIR", str(tmp_path))
    return tmp_path


def test_cpu_recording_has_every_table_and_its_provenance(cpu_doc):
    p = cpu_doc["provenance"]
    assert (p["device_type"], p["gpu_rows"], p["quick"], p["torch"]) == ("cpu", False, True, torch.__version__)
    assert p["device_name"] == bench.device_name("cpu") and "no GPU measurement" in p["rows"]
    assert "no chip stands for it" in p["note"]  # this_machine's note: why no catalog chip
    assert datetime.fromisoformat(p["date_utc"]).tzinfo is not None and len(p["load_avg_before"]) == 3
    ops = {r["op"] for r in cpu_doc["timings"]}
    assert {"GEMM", "softmax", "SDPA", "prefill", "decode", "generate"} <= ops
    assert {r["dtype"] for r in cpu_doc["timings"]} == {"fp32"}  # the CPU cells of the labs
    for r in cpu_doc["timings"]:
        assert ("unresolved" in r or r["median_s"] > 0) and r["n_runs"] >= 1
        if r["flops"]:
            assert r["flops_per_s"] == pytest.approx(r["flops"] / r["median_s"])
    gemm = next(r for r in cpu_doc["timings"] if r["workload"] == "GEMM 64 fp32")
    assert gemm["flops"] == 2 * 64**3 and gemm["sim_op"] == "matmul" and gemm["sim_shape"] == [64, 64, 64]
    profiled = {r["workload"] for r in cpu_doc["profile"]}
    assert profiled == {"GEMM 64 fp32", "softmax 64x64 fp32", "SDPA 1x2x16x8 fp32", "tiny-block prefill b1 s8 fp32"}
    llm = "Qwen2.5-0.5B-Instruct (1 layers)"  # Lab 1's real model, cut to one layer by --quick
    assert {r["workload"] for r in cpu_doc["memory"]} == profiled | {f"{llm} generate 2 tokens fp32"}
    assert all(m["peak_bytes"] >= 0 and "profiler" in m["method"] for m in cpu_doc["memory"])
    rows = {r["workload"]: r for r in cpu_doc["timings"] if r["workload"].startswith(llm)}
    fwd, gen = rows[f"{llm} forward b1 s4 fp32"], rows[f"{llm} generate 2 tokens fp32"]
    step = rows[f"{llm} decode step (from generate) fp32"]
    assert fwd["flops"] > 0 and fwd["sim_model"] == "qwen2.5-0.5b-instruct" and fwd["sim_layers"] == 1
    assert "random weights" in fwd["llm"] or "real weights" in fwd["llm"]
    assert step == record.decode_step_row([fwd, gen], record.plan("cpu", quick=True))  # derived, not measured
    assert (step["phase"], step["seq"], step["sim_layers"]) == ("decode", 5, 1)
    assert any(r["key"] == "aten::mm" for r in cpu_doc["profile"] if r["workload"] == "GEMM 64 fp32")
    kinds = {(r["dtype"], r["what"]) for r in cpu_doc["peaks"]}
    assert {("fp32", "gemm"), ("fp32", "copy")} <= kinds
    assert record.default_name(cpu_doc) == "cpu-" + record.re.sub(r"[^a-z0-9]+", "-", p["device_name"].lower()
                                                                   ).strip("-")


def test_the_decode_step_is_derived_only_where_generate_minus_forward_is_above_the_noise():
    p = record.plan("cpu", quick=False)  # 16 new tokens
    fwd = {"workload": "M (1 layers) forward b1 s32 fp32", "op": "prefill", "sim_model": record.LLM_NAME, "dtype":
           "fp32", "median_s": 0.5, "iqr_s": 0.01, "n_runs": 5, "sim_layers": 1, "llm": "random weights"}
    gen = {"op": "generate", "llm": "random weights", "median_s": 2.0, "iqr_s": 0.02, "n_runs": 3}
    step = record.decode_step_row([fwd, gen], p)
    assert step["median_s"] == pytest.approx(1.5 / 15) and "unresolved" not in step and step["n_runs"] == 3
    assert step["workload"] == "M (1 layers) decode step (from generate) fp32" and step["seq"] == 32 + 8
    # generate measured faster than the forward pass (one noisy run each under load), or within the noise:
    # no step, rather than a clamped 0 s
    for gen_s in (0.4, 0.52):
        step = record.decode_step_row([fwd, {**gen, "median_s": gen_s}], p)
        assert step["median_s"] is None and "not above the timings' noise" in step["unresolved"]


class FakeCudaLayer(record.Layer):
    """The CUDA branch with tensors on the CPU: every torch.cuda call goes to the faked functions; only the
    profiler keeps to CPU activity (Kineto would look for a real CUDA runtime)."""

    def __init__(self, device):
        super().__init__(device)
        self.tensor_device = torch.device("cpu")

    def activities(self):
        assert ProfilerActivity.CUDA in super().activities()
        return [ProfilerActivity.CPU]


def test_recording_script_cuda_branch_on_a_faked_t4(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda d=None: "Tesla T4")
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d=None: SimpleNamespace(
        name="Tesla T4", major=7, minor=5, multi_processor_count=40, total_memory=15_828_320_256))
    monkeypatch.setattr(torch.version, "cuda", "12.4")
    monkeypatch.setattr(torch.cuda, "synchronize", lambda d=None: calls.append("sync"))
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda d=None: calls.append("reset"))
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda d=None: 1000)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda d=None: 1000 + 4096)
    real_peaks, real_gemms, asked = bench.measure_peaks, bench.measure_gemm_peaks, []

    def peaks(device, dtype, **kw):  # the real measurement, on the CPU, of what the script asked the GPU for
        asked.append(("peaks", str(device), dtype))
        return real_peaks("cpu", dtype, **kw)

    def gemms(device, dtypes, **kw):
        asked.append(("gemms", str(device), tuple(dtypes)))
        return real_gemms("cpu", dtypes, **kw)

    monkeypatch.setattr(bench, "measure_peaks", peaks)
    monkeypatch.setattr(bench, "measure_gemm_peaks", gemms)
    doc = record.record("cuda", quick=True, layer=FakeCudaLayer(torch.device("cuda:0")))
    p = doc["provenance"]
    assert (p["device"], p["device_name"], p["chip"], p["match"], p["cuda"]) == ("cuda:0", "Tesla T4", "t4",
                                                                                 "exact", "12.4")
    assert p["gpu_rows"] is True and record.default_name(doc) == "t4" and p["rows"].startswith("GPU rows")
    # a T4 multiplies in fp32 and fp16 (no bf16 tensor cores): no bf16 row, no bf16 peak asked for
    assert {r["dtype"] for r in doc["timings"]} == {"fp32", "fp16"}
    assert asked == [("peaks", "cuda:0", torch.float32), ("gemms", "cuda:0", (torch.float16,))]
    # memory peaks come from torch.cuda.max_memory_allocated minus what was live before, for the fp16 cells
    assert doc["memory"] and all(m["peak_bytes"] == 4096 and m["method"] == "torch.cuda.max_memory_allocated"
                                 and m["workload"].endswith("fp16") for m in doc["memory"])
    assert calls.count("reset") == len(doc["memory"]) and calls.count("sync") > len(doc["timings"])
    gen = [r for r in doc["timings"] if r["op"] == "generate"]
    assert len(gen) == 1 and gen[0]["dtype"] == "fp16"
    assert [m["workload"] for m in doc["memory"] if "generate" in m["workload"]] == [gen[0]["workload"]]


def test_load_available_and_provenance(cpu_doc, ref_dir):
    (ref_dir / "cpu-quick.json").write_text(json.dumps(cpu_doc), encoding="utf-8")
    table = reference.available()
    assert list(table["name"]) == ["cpu-quick"] and not table["gpu_rows"].any()
    ref = reference.load("cpu-quick")
    assert ref.provenance["device_type"] == "cpu" and len(ref.timings) == len(cpu_doc["timings"])
    assert ref.timings.attrs["provenance"]["torch"] == torch.__version__
    assert ref.label.startswith(f"{ref.provenance['device_name']} (cpu), torch {torch.__version__}")
    assert "quick run" in ref.label
    assert reference.load(ref_dir / "cpu-quick.json").name == "cpu-quick"
    with pytest.raises(DFAError, match=r"no reference measurements 't4'; recorded: cpu-quick; no GPU reference"):
        reference.load("t4")


def test_load_by_chip_alias_and_bad_files(cpu_doc, ref_dir):
    gpu = {**cpu_doc, "provenance": {**cpu_doc["provenance"], "device_type": "cuda", "gpu_rows": True,
                                     "device_name": "Tesla T4", "chip": "t4"}}
    (ref_dir / "t4.json").write_text(json.dumps(gpu), encoding="utf-8")
    assert reference.load("Tesla-T4").name == "t4"  # the catalog alias names the file
    (ref_dir / "broken.json").write_text("{}", encoding="utf-8")
    with pytest.raises(DFAError, match="not a reference file"):
        reference.load("broken")
    with pytest.raises(DFAError, match="recorded: broken, t4$"):  # a GPU file exists: no 'not yet' hint
        reference.load("l4")


def test_reference_roofline_uses_the_recorded_peaks(cpu_doc, ref_dir):
    doc = json.loads(json.dumps(cpu_doc))
    doc["peaks"] = [{"dtype": "fp32", "what": "gemm", "gemm_n": 1024, "flops_per_s": 20e9},
                    {"dtype": "fp32", "what": "copy", "copy_bytes": 1 << 28, "bytes_per_s": 5e9},
                    {"dtype": "fp16", "what": "gemm", "skipped": "skipped: no fp16 matmul"},
                    {"dtype": "bf16", "what": "gemm", "gemm_n": 1024, "flops_per_s": 30e9}]
    (ref_dir / "x.json").write_text(json.dumps(doc), encoding="utf-8")
    with pytest.warns(UserWarning, match="fp16: skipped"):
        rl = reference.load("x").roofline()
    assert (rl.source, rl.dtype, rl.peak_flops, rl.bandwidth()) == ("measured", "bf16", 30e9, 5e9)
    assert [c.value for c in rl.ceilings if c.kind == "compute"] == [20e9] and "reference:" in rl.note


def test_vs_simulated_puts_the_simulator_beside_the_reference(cpu_doc, ref_dir):
    (ref_dir / "cpu-quick.json").write_text(json.dumps(cpu_doc), encoding="utf-8")
    ref = reference.load("cpu-quick")
    with pytest.raises(DFAError, match="no catalog chip stands for.*vs_simulated\\('t4'\\)"):
        ref.vs_simulated()
    t = ref.vs_simulated("t4")
    name = ref.provenance["device_name"]
    assert list(t.columns) == [f"measured ({name}, reference)", "simulated (t4)", "sim/measured"]
    sim_rows = [r["workload"] for r in cpu_doc["timings"] if r.get("sim_op") or r.get("sim_model")]
    unresolved = [r["workload"] for r in cpu_doc["timings"] if "unresolved" in r]
    # every op the simulator models (generate is not one) that has a measured time
    assert list(t.index) == [w for w in sim_rows if w not in unresolved] and t.attrs["skipped"] == unresolved
    assert (t["simulated (t4)"] > 0).all()
    # the real model's rows are simulated at the layer count they were measured with (1 under --quick)
    from common.models import get_config
    from common.sim import simulate_llm
    one = replace(get_config("qwen2.5-0.5b-instruct"), n_layers=1)
    fwd = next(w for w in sim_rows if w.startswith("Qwen2.5-0.5B-Instruct") and "forward" in w)
    assert t.loc[fwd, "simulated (t4)"] == pytest.approx(
        simulate_llm(one, "gpu", phase="prefill", batch=1, seq=4, chip="t4", dtype="fp32").time_s)
    assert t["sim/measured"].to_numpy() == pytest.approx((t.iloc[:, 1] / t.iloc[:, 0]).to_numpy())
    doc = json.loads(json.dumps(cpu_doc))
    doc["timings"][0]["dtype"] = "bf16"  # a T4 has no bf16 datapath: that row is left out, and listed
    (ref_dir / "bf.json").write_text(json.dumps(doc), encoding="utf-8")
    t = reference.load("bf").vs_simulated("t4")
    assert t.attrs["skipped"] == [doc["timings"][0]["workload"], *unresolved]
    assert doc["timings"][0]["workload"] not in t.index
    doc["timings"][-1] = {**doc["timings"][-1], "median_s": None, "unresolved": "planted"}  # the decode step
    (ref_dir / "step.json").write_text(json.dumps(doc), encoding="utf-8")
    assert doc["timings"][-1]["workload"] in reference.load("step").vs_simulated("t4").attrs["skipped"]


def test_committed_references_are_measurements_with_provenance():
    """Every file in common/measure/reference_data names its machine, torch, date and load; GPU rows only from a GPU."""
    files = sorted((ROOT / "common" / "measure" / "reference_data").glob("*.json"))
    assert files, "at least the CPU reference of this repository"
    for path in files:
        doc = json.loads(path.read_text(encoding="utf-8"))
        p = doc["provenance"]
        assert p["device_name"] and p["torch"] and p["date_utc"] and p["load_avg_before"] is not None, path
        assert p["quick"] is False, f"{path.name}: a --quick run is a check of the script, not a reference"
        assert p["gpu_rows"] == (p["device_type"] == "cuda"), path.name
        if p["gpu_rows"]:  # a GPU file comes from a CUDA run: torch saw a GPU and a CUDA version
            assert p["cuda"] and p["device"].startswith("cuda"), path.name
        else:
            assert p["cuda"] is None and {r["dtype"] for r in doc["timings"]} == {"fp32"}, path.name
            assert all(m["method"].startswith("torch.profiler") for m in doc["memory"]), path.name
