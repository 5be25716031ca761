"""``benchmarks/device_profile.py``: the summary a GPU loan's ``gpu.py --part step --profile`` prints is computed
right (busy time as the union of kernel intervals, per-step figures, kinds by name), checked here on made-up
intervals against plain references; and the trace itself runs on a CPU."""
import importlib.util
from pathlib import Path

import pytest
import torch

PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "device_profile.py"
_spec = importlib.util.spec_from_file_location("device_profile", PATH)
device_profile = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(device_profile)


def covered_units(intervals):
    """Reference union length for integer intervals: the unit cells [t, t + 1) some interval covers."""
    return len({t for start, end in intervals for t in range(start, end)})


@pytest.mark.parametrize("intervals", [
    [],
    [(0, 5)],
    [(0, 5), (10, 12)],                    # disjoint
    [(0, 5), (3, 8)],                      # overlapping (two streams)
    [(0, 10), (2, 4), (5, 6)],             # nested
    [(7, 9), (0, 3), (2, 8), (20, 21)],    # unsorted, chained
    [(0, 4), (4, 6)],                      # touching
])
def test_busy_time_is_the_union_of_the_intervals(intervals):
    assert device_profile.busy_us(intervals) == covered_units(intervals)


def test_busy_time_of_random_intervals_matches_the_cell_count():
    g = torch.Generator().manual_seed(0)
    for _ in range(50):
        starts = torch.randint(0, 100, (12,), generator=g).tolist()
        lengths = torch.randint(0, 15, (12,), generator=g).tolist()
        intervals = [(s, s + n) for s, n in zip(starts, lengths)]
        assert device_profile.busy_us(intervals) == covered_units(intervals)


@pytest.mark.parametrize("name, kind", [
    ("triton_poi_fused_add_mul_0", "inductor (generated)"),
    ("triton_red_fused_sum_3", "inductor (generated)"),
    ("sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32", "matrix products"),
    ("ampere_sgemm_128x64_nn", "matrix products"),
    ("nvjet_tst_128x64_64x4_1x2_h_bz_TNT", "matrix products"),
    ("sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nchw", "convolutions"),
    ("void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>(...)", "matrix products"),
    ("void regular_fft<85u, 17u, 5u, padding_t, twiddle_t>(...)", "FFTs"),
    ("void at::native::(anonymous namespace)::fused_adam_kernel<float>(...)", "optimizer"),
    ("void at::native::multi_tensor_apply_kernel<...>(...)", "optimizer"),
    ("Memcpy DtoD (Device -> Device)", "copies"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(...)",
     "other (aten kernels)"),
])
def test_kernels_are_sorted_into_kinds_by_name(name, kind):
    assert device_profile.kind_of(name) == kind


def test_the_summary_is_per_step_and_ranks_the_largest_first():
    # two steps: a GEMM of 300 us and two generated kernels of 100 us each per step, overlapping once
    kernels = [("gemm_a", 0, 300), ("triton_x", 300, 400), ("triton_x", 350, 450),
               ("gemm_a", 1000, 1300), ("triton_x", 1300, 1400), ("triton_x", 1400, 1500)]
    s = device_profile.summarize(kernels, steps=2, wall_seconds=4e-3)
    assert s["wall_ms"] == pytest.approx(2.0)
    assert s["busy_ms"] == pytest.approx((450 + 500) / 2 / 1e3)  # the overlap counted once
    assert s["kernels"] == 3
    assert list(s["by_kind"]) == ["matrix products", "inductor (generated)"]
    assert s["by_kind"]["matrix products"] == pytest.approx([0.3, 1])
    assert s["by_kind"]["inductor (generated)"] == pytest.approx([0.2, 2])
    assert [row[0] for row in s["top"]] == ["gemm_a", "triton_x"]
    assert s["top"][1][1:] == pytest.approx([0.2, 2, 100.0])
    # nested CPU operators' self times do not overlap: summed, not merged
    assert device_profile.summarize([("a", 0, 5), ("b", 0, 5)], 1, 1e-3, overlapping=False)["busy_ms"] == 0.01
    with pytest.raises(ValueError, match="steps must be >= 1"):
        device_profile.summarize(kernels, steps=0, wall_seconds=1.0)


def test_a_cpu_trace_lists_the_operators_of_the_work():
    a = torch.randn(64, 64)

    def work():
        for _ in range(3):
            (a @ a).sum()
        return 1e-3

    s = device_profile.profile_steps(work, 3, torch.device("cpu"))
    assert s["device"] == "cpu" and s["kernels"] >= 2
    assert "aten::mm" in [row[0] for row in s["top"]]
    text = device_profile.format_profile(s)
    assert "profile of 3 steps" in text and "aten::mm" in text
