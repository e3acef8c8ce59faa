"""Recommendations: llama.cpp flags, nvcc, vLLM image family, PyTorch index."""

from __future__ import annotations

from typing import Any

from checks.facts.model import HostFacts, from_dict
from checks.reporting import recommend


def _facts(driver: str | None, *ccs: str, **extra: Any) -> HostFacts:
    gpus = [
        {"index": i, "name": f"GPU {cc}", "compute_capability": cc, "brand_class": "consumer"}
        for i, cc in enumerate(ccs)
    ]
    return from_dict(HostFacts, {"driver": {"version": driver}, "gpus": gpus, **extra})


def _by_topic(facts: HostFacts) -> dict[str, recommend.Recommendation]:
    return {r.topic: r for r in recommend.recommend(facts)}


def test_llama_cpp_archs_are_only_what_the_gpus_need() -> None:
    rec = recommend.llama_cpp_flags(_facts("580.95.05", "8.6", "12.0", "8.6"))
    assert rec.value == "-DGGML_CUDA=ON -DGGML_NATIVE=OFF -DCMAKE_CUDA_ARCHITECTURES=86;120a"
    assert "table:archs" in rec.basis
    h100 = recommend.llama_cpp_flags(_facts("580.95.05", "9.0"))
    assert h100.value.endswith("=90a")
    gb10 = recommend.llama_cpp_flags(_facts("580.95.05", "12.1"))
    assert gb10.value.endswith("=121a")


def test_no_gpu_means_cpu_only_everywhere() -> None:
    recs = _by_topic(HostFacts())
    assert recs["llama.cpp CMake flags"].value == "-DGGML_CUDA=OFF"
    assert recs["PyTorch wheel index"].value.endswith("/cpu")
    assert all("GPU-001" in r.basis for r in recs.values())


def test_nvcc_for_gb10_skips_13_0() -> None:
    rec = recommend.nvcc(_facts("580.95.05", "12.1"))
    assert rec.value == "CUDA 12.9.1", rec
    assert "LCPP-001" in rec.basis


def test_nvcc_for_rtx_5090_skips_13_2_before_update_2() -> None:
    rec = recommend.nvcc(_facts("595.58.03", "12.0"))
    assert rec.value == "CUDA 13.1.1", rec
    assert "LCPP-002" in rec.basis
    assert recommend.nvcc(_facts("595.71.05", "12.0")).value == "CUDA 13.2.2"


def test_nvcc_for_volta_stays_on_12() -> None:
    assert recommend.nvcc(_facts("595.71.05", "7.0")).value == "CUDA 12.9.1"


def test_nvcc_when_the_driver_is_too_old_for_any_build() -> None:
    rec = recommend.nvcc(_facts("560.35.05", "12.0"))
    assert rec.value == "CUDA 12.8"
    assert "upgrade the driver" in rec.detail


def test_nvcc_names_installed_good_toolkits() -> None:
    facts = _facts(
        "580.95.05", "8.6", toolkits=[{"path": "/usr/local/cuda-13.0", "release": "13.0"}]
    )
    assert "/usr/local/cuda-13.0" in recommend.nvcc(facts).detail


def test_vllm_family_follows_the_driver() -> None:
    assert recommend.vllm_image(_facts("580.95.05", "8.6")).value == "cu130"
    assert recommend.vllm_image(_facts("575.57.08", "8.6")).value == "cu129"
    assert recommend.vllm_image(_facts("570.133.20", "12.0")).value == "cu128"
    too_old = recommend.vllm_image(_facts("550.144.03", "8.9"))
    assert too_old.value.startswith("none")
    assert "570.26" in too_old.detail
    assert recommend.vllm_image(_facts(None, "8.9")).value == "unknown"


def test_torch_index_covers_every_gpu_within_the_driver() -> None:
    assert recommend.torch_index(_facts("580.95.05", "12.0")).value.endswith("/cu130")
    assert recommend.torch_index(_facts("570.133.20", "12.0")).value.endswith("/cu128")
    assert recommend.torch_index(_facts("580.95.05", "6.1")).value.endswith("/cu126")
    mixed = recommend.torch_index(_facts("575.57.08", "7.0", "8.9"))
    assert mixed.value.endswith("/cu129")
    assert recommend.torch_index(_facts("550.144.03", "12.0")).value == "none"


def test_unknown_compute_capability_is_reported_as_unknown() -> None:
    facts = from_dict(HostFacts, {"gpus": [{"index": 0, "name": "Mystery GPU"}]})
    recs = _by_topic(facts)
    assert recs["llama.cpp CMake flags"].value == "unknown"
    assert recs["PyTorch wheel index"].value == "unknown"


def test_installed_toolkit_judged_by_its_update() -> None:
    """13.2.2 is fixed for sm_120; a 13.2 of unknown update is not trusted there; Ampere is fine."""
    fixed = {"path": "/usr/local/cuda-13.2", "release": "13.2", "update": "13.2.2"}
    unknown = {"path": "/opt/cuda-13.2", "release": "13.2"}
    rtx5090 = _facts("595.71.05", "12.0", toolkits=[fixed, unknown])
    detail = recommend.nvcc(rtx5090).detail
    assert "/usr/local/cuda-13.2" in detail and "/opt/cuda-13.2" not in detail
    ampere = _facts("595.71.05", "8.6", toolkits=[unknown])
    assert "/opt/cuda-13.2" in recommend.nvcc(ampere).detail
