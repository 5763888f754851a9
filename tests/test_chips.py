"""The catalog is data: every number sourced, no sparse peaks, lookups and ridge points right."""
import pytest

from common.chips import CHIPS, DTYPES, chip_for_device_name, get_chip, numeric_fields_without_source
from common.errors import DFAError


@pytest.mark.parametrize("name", list(CHIPS))
def test_every_set_number_has_a_source(name):
    chip = CHIPS[name]
    assert numeric_fields_without_source(chip) == []
    for key, est in chip.estimates.items():
        assert est.derivation and est.value > 0, key


def test_catalog_holds_the_issue_chips():
    wanted = {"t4", "l4", "a100-40gb", "a100-80gb", "h100-sxm", "h200", "tpu-v4", "tpu-v5e", "tpu-v5p", "tpu-v6e",
              "wse-2", "wse-3", "groq-lpu", "spyre"}
    assert wanted <= set(CHIPS)


def test_dense_not_sparse_peaks():
    # H100 SXM dense bf16 is 989.4 TF; the datasheet's 1979 TF is the 2:4-sparse figure.
    assert get_chip("h100-sxm").peak("bf16") == pytest.approx(989.4e12)
    # WSE-3's 125 PF is sparse: no published dense peak, only a labelled estimate far below it.
    wse = get_chip("wse-3")
    assert "bf16" not in wse.peak_flops
    value, estimated = wse.compute_peak("bf16")
    assert estimated and value < 125e15 / 4


def test_peak_consistent_with_units_and_clock():
    # A100: 432 tensor cores x 256 FMA x 2 FLOP x 1.41 GHz = 311.9 TF ~ the published 312 TF.
    a100 = get_chip("a100-40gb")
    assert 432 * 256 * 2 * a100.clock_hz == pytest.approx(a100.peak("fp16"), rel=0.01)
    # TPU v5e: 4 MXU x 128 x 128 x 2 x 1.5 GHz = 196.6 TF ~ 197 TF.
    v5e = get_chip("tpu-v5e")
    assert 4 * 128 * 128 * 2 * v5e.clock_hz == pytest.approx(v5e.peak("bf16"), rel=0.01)


def test_ridge_point_by_hand():
    # H100 SXM: 989.4e12 / 3.35e12 = 295.3 FLOP/B; T4 fp16: 65e12 / 320e9 = 203.1 FLOP/B.
    assert get_chip("h100-sxm").ridge_point("bf16") == pytest.approx(295.34, rel=1e-3)
    assert get_chip("t4").ridge_point("fp16") == pytest.approx(203.125)
    # SMEM ridge: 128 B/clk/SM x 132 SMs x 1.83 GHz = 30.9 TB/s -> 32 FLOP/B.
    assert get_chip("h100-sxm").ridge_point("bf16", "SMEM") == pytest.approx(989.4e12 / (128 * 132 * 1.83e9))


def test_sram_only_chips_have_sram_as_main_memory():
    assert get_chip("groq-lpu").main_memory.name == "SRAM"
    assert get_chip("groq-lpu").main_memory.capacity == 230e6
    assert get_chip("wse-3").main_memory.total_capacity == pytest.approx(900_000 * 48e3)
    assert get_chip("spyre").main_memory.name == "LPDDR5"


def test_unknown_chip_and_dtype_errors_are_one_line_with_choices():
    with pytest.raises(DFAError, match=r"unknown chip 'h300'; valid: .*h100-sxm"):
        get_chip("h300")
    with pytest.raises(DFAError, match="t4.*no dense bf16.*supported: fp32, fp16, int8"):
        get_chip("t4").peak("bf16")
    with pytest.raises(DFAError, match="unknown dtype 'fp64'"):
        get_chip("t4").peak("fp64")
    assert set(DTYPES) >= {"fp32", "bf16", "fp16", "fp8", "int8"}


def test_aliases_and_torch_dtype_names():
    assert get_chip("H100") is get_chip("h100-sxm")
    assert get_chip("v5e") is get_chip("tpu-v5e")
    assert get_chip("a100").peak("torch.bfloat16") == 312e12


@pytest.mark.parametrize("device_name, expected", [
    ("Tesla T4", "t4"),
    ("NVIDIA A100-SXM4-40GB", "a100-40gb"),
    ("NVIDIA A100-SXM4-80GB", "a100-80gb"),
    ("NVIDIA H100 80GB HBM3", "h100-sxm"),
    ("NVIDIA H200", "h200"),
    ("NVIDIA H100 PCIe", None),  # PCIe part: lower clocks/bandwidth than the SXM record, so not guessed
    ("NVIDIA GeForce RTX 4090", None),
    ("NVIDIA L4", "l4"),
    ("NVIDIA L40S", None),  # a bigger Ada part: not the L4
])
def test_device_name_lookup_never_guesses(device_name, expected):
    chip = chip_for_device_name(device_name)
    assert (chip.name if chip else None) == expected


def test_l4_dense_peaks_are_half_the_sparse_datasheet_and_match_its_units():
    l4 = get_chip("l4")
    # datasheet: 242 TFLOP/s fp16 and 485 fp8 with 2:4 sparsity; dense is one half
    assert l4.peak("fp16") == pytest.approx(242e12 / 2) and l4.peak("fp8") == pytest.approx(485e12 / 2)
    # 232 tensor cores x 128 FMA x 2 x 2.04 GHz = 121 TF; 58 SMs x 128 fp32 lanes x 2 x 2.04 GHz = 30.3 TF
    assert 232 * 128 * 2 * l4.clock_hz == pytest.approx(l4.peak("fp16"), rel=0.01)
    assert l4.compute_units * 128 * 2 * l4.clock_hz == pytest.approx(l4.peak("fp32"), rel=0.01)
    assert l4.main_memory.bandwidth == 300e9 and l4.supports("bf16") and not get_chip("t4").supports("bf16")
    # no published copy measurement for the L4: no bandwidth fraction is made up
    assert "achievable_bandwidth_fraction" not in l4.estimates


def test_every_gpu_states_its_compute_capability():
    ccs = {c.name: c.fact("compute_capability") for c in CHIPS.values() if c.kind == "gpu"}
    assert ccs == {"t4": 7.5, "l4": 8.9, "a100-40gb": 8.0, "a100-80gb": 8.0, "h100-sxm": 9.0, "h200": 9.0}
