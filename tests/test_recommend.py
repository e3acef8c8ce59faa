"""Recommendations: llama.cpp flags, nvcc, vLLM image family, PyTorch index."""

from __future__ import annotations

import json
from typing import Any

import pytest

from checks.facts import capture
from checks.facts.model import HostFacts, from_dict
from checks.matrix import engine
from checks.reporting import recommend
from tests.conftest import FIXTURES, REAL


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


def test_nvcc_for_sm_120_on_a_580_driver_skips_13_0() -> None:
    """nvcc 13.0 breaks llama.cpp MMQ kernels on sm_120 too (LCPP-001): 12.9.1 on a 580 driver."""
    rec = recommend.nvcc(_facts("580.105.08", "12.0"))
    assert rec.value == "CUDA 12.9.1", rec
    assert "LCPP-001" in rec.basis
    assert recommend.build_release(_facts("580.105.08", "12.0")) == "12.9.1"
    assert recommend.nvcc(_facts("580.105.08", "8.9")).value == "CUDA 13.0.2"


def test_nvcc_for_blackwell_on_a_590_driver_is_13_1() -> None:
    assert recommend.nvcc(_facts("590.48.01", "12.0")).value == "CUDA 13.1.1"
    assert recommend.nvcc(_facts("590.48.01", "12.1")).value == "CUDA 13.1.1"


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


NVCC_13 = {"path": "/usr/local/cuda-13.0/bin/nvcc", "release": "13.0", "version": "13.0.88"}


def test_nvcc_13_on_a_575_driver_is_not_called_good() -> None:
    """DRV-001 reports nvcc 13.0 on driver 575.x (CUDA 13 needs 580.65.06): so does the advice."""
    facts = _facts("575.57.08", "8.9", toolkits=[NVCC_13])
    drv_001 = [f for f in engine.evaluate(facts) if f.rule == "DRV-001"]
    assert [(f.severity, f.subject) for f in drv_001] == [
        ("error", f"CUDA toolkit {NVCC_13['path']}")
    ]
    assert recommend.good_toolkits(facts) == []
    rec = recommend.nvcc(facts)
    assert rec.value == "CUDA 12.9.1", rec
    assert "installed and good" not in rec.detail and "DRV-001" in rec.basis
    assert recommend.build_release(facts) == "12.9.1"
    newer = _facts("580.95.05", "8.9", toolkits=[NVCC_13])
    assert [t.path for t in recommend.good_toolkits(newer)] == [NVCC_13["path"]]
    assert f"installed and good: CUDA toolkit {NVCC_13['path']}" in recommend.nvcc(newer).detail


def test_nvcc_builds_for_the_driver_of_a_compressed_kernel() -> None:
    """Below 550, ggml's compressed kernels of CUDA 12.8+ do not load (LCPP-005): not good."""
    nvcc_128 = {"path": "/usr/local/cuda-12.8/bin/nvcc", "release": "12.8", "version": "12.8.93"}
    facts = _facts("535.183.01", "8.6", toolkits=[nvcc_128])
    assert "LCPP-005" in {f.rule for f in engine.evaluate(facts)}
    assert recommend.good_toolkits(facts) == []
    assert recommend.nvcc(facts).value == "CUDA 12.2.2"


def test_no_release_good_on_the_driver_is_never_installed() -> None:
    """Driver 418 runs no CUDA family an RTX 3090 builds with: advice, but nothing to install."""
    facts = _facts("418.87.01", "8.6")
    rec = recommend.nvcc(facts)
    assert rec.value == "CUDA 11.1" and "upgrade the driver first" in rec.detail
    assert recommend.build_release(facts).startswith("none good on this host as it is: CUDA 11.1")


def _load(name: str) -> HostFacts:
    return from_dict(HostFacts, json.loads((FIXTURES / f"{name}.json").read_text())["facts"])


@pytest.mark.parametrize(
    ("facts", "rule"),
    [
        (capture.load([str(REAL / "err_nvml-mismatch__tinygrad-ogkm-47.txt")]), "DRV-003"),
        (_load("rules/DRV-003/fail"), "DRV-003"),
        (_load("rules/DRV-007/fail"), "DRV-007"),
        (_load("rules/DRV-007/fail-no-devices"), "DRV-007"),
        (_load("rules/HOST-001/fail-unreachable"), "HOST-001"),
    ],
    ids=["nvml-mismatch-capture", "DRV-003", "DRV-007", "DRV-007-no-devices", "HOST-001"],
)
def test_a_broken_driver_is_reported_as_broken_never_as_no_gpu(facts: HostFacts, rule: str) -> None:
    recs = _by_topic(facts)
    assert len(recs) == 4
    for rec in recs.values():
        assert rec.value == "unknown until the driver works", rec
        assert rec.basis == (rule,)
        assert rec.detail.startswith(f"the NVIDIA driver is broken ({rule}: "), rec.detail
        assert "CPU" not in rec.detail and "no NVIDIA GPU" not in rec.detail
    findings = {f.rule for f in engine.evaluate(facts)}
    assert rule in findings and "GPU-001" not in findings
    assert recommend.build_release(facts).startswith("unknown until the driver works")


def test_without_any_driver_the_host_is_cpu_only() -> None:
    """Nothing NVIDIA answers and nothing shows a GPU: GPU-001, and CPU-only advice."""
    facts = _load("rules/GPU-001/fail")
    assert recommend.broken_driver(facts) is None
    assert recommend.llama_cpp_flags(facts).value == "-DGGML_CUDA=OFF"
