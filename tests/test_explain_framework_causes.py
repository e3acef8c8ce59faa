"""Causes from the Python frameworks around the engines: Triton's kernels on an old driver, a
CPU-only torch, flash-attn 2 on a pre-Ampere GPU, torch extensions built for another torch,
xFormers' FlashAttention-3 off Hopper, a TensorRT release without the GPU's SM, a cut library."""

from __future__ import annotations

import io
from pathlib import Path

from checks.facts.model import HostFacts, from_dict
from checks.logs import explain, logscan

TRITON_ON_470 = (
    b"RuntimeError: Triton Error [CUDA]: device kernel image is invalid.\n"
    b"| NVIDIA-SMI 470.182.03   Driver Version: 470.182.03   CUDA Version: 11.4     |\n"
)


def _diagnoses(data: bytes) -> list[explain.Diagnosis]:
    return explain.diagnose(logscan.scan(io.BytesIO(data)))


def test_triton_wording_outranks_the_generic_kernel_image_reading() -> None:
    found = _diagnoses(b"RuntimeError: Triton Error [CUDA]: device kernel image is invalid\n")
    assert [d.signature for d in found][:2] == [
        "triton-kernel-image-invalid",
        "kernel-image-invalid",
    ]
    assert "llama.cpp" not in found[0].message


def test_triton_on_a_cuda_11_driver_names_the_driver() -> None:
    top = _diagnoses(TRITON_ON_470)[0]
    assert top.signature == "triton-kernel-image-invalid"
    assert "470.182.03" in top.message and "CUDA 12 ptxas" in top.message


def test_ggml_wording_stays_the_generic_reading() -> None:
    found = _diagnoses(b"CUDA error: device kernel image is invalid\n")
    assert [d.signature for d in found] == ["kernel-image-invalid"]


def test_flash_attn_extension_outranks_the_generic_extension_reading() -> None:
    line = (
        b"ImportError: /x/flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so: undefined symbol: "
        b"_ZN3c104cuda9SetDeviceEi\n"
    )
    assert _diagnoses(line)[0].signature == "flash-attn-abi-mismatch"


def test_generic_extension_reading_names_the_library() -> None:
    line = b"ImportError: /x/exllamav2_ext.so: undefined symbol: _ZN3c104cuda14ExchangeDeviceEa\n"
    top = _diagnoses(line)[0]
    assert top.signature == "torch-extension-abi-mismatch"
    assert "exllamav2_ext.so" in top.message


def test_flash_attn2_refusal_is_its_own_diagnosis() -> None:
    log = b"RuntimeError: FlashAttention only supports Ampere GPUs or newer.\n"
    top = _diagnoses(log)[0]
    assert top.signature == "flash-attn2-needs-ampere"


def test_pre_ampere_predicate_needs_every_gpu_known() -> None:
    below = explain.PREDICATES["cc_below_8_0"]
    assert below({"ccs": "7.5"}) and below({"ccs": "8.6 7.0"})
    assert not below({"ccs": "8.0 12.0"}) and not below({})


BF16_FIXTURES = Path(__file__).parent / "fixtures" / "signatures" / "cublas-bf16-gemm-unsupported"


def _bf16_refusal(gpu: str | None) -> list[explain.Diagnosis]:
    host = from_dict(HostFacts, {"gpus": [{"index": 0, "name": gpu}]}) if gpu else None
    with (BF16_FIXTURES / "match_mineru_tesla_m40.log").open("rb") as stream:
        return explain.diagnose(logscan.scan(stream), host=host)


def test_cublas_bf16_refusal_needs_a_gpu_without_bf16_gemm() -> None:
    """An unknown GPU leaves the reading, a Maxwell GPU is named, every GPU at 7.0+ rules it out."""
    assert [d.signature for d in _bf16_refusal(None)] == ["cublas-bf16-gemm-unsupported"]
    (maxwell,) = _bf16_refusal("NVIDIA GeForce GTX 970")
    assert "GTX 970 (compute capability 5.2)" in maxwell.message
    assert _bf16_refusal("NVIDIA GeForce RTX 3090") == []
    assert _bf16_refusal("Tesla V100-SXM2-32GB") == []
    at_least = explain.PREDICATES["cc_at_least_7_0"]
    assert at_least({"ccs": "7.0"}) and at_least({"ccs": "8.6 7.5"})
    assert not at_least({"ccs": "8.6 5.2"}) and not at_least({})


SIGNATURES = Path(__file__).parent / "fixtures" / "signatures"


def _fixture(folder: str, name: str, gpu: str | None = None) -> list[explain.Diagnosis]:
    host = from_dict(HostFacts, {"gpus": [{"index": 0, "name": gpu}]}) if gpu else None
    with (SIGNATURES / folder / name).open("rb") as stream:
        return explain.diagnose(logscan.scan(stream), host=host)


def test_fa3_hopper_kernel_failing_on_a_hopper_is_another_cause() -> None:
    """Unknown GPU or a Blackwell: the reading; every GPU a Hopper: no finding from it."""
    name = "match_xformers_0032_sm120_windows.log"
    for gpu in (None, "NVIDIA GeForce RTX 5090"):
        top = _fixture("fa3-hopper-kernel-off-hopper", name, gpu)[0]
        assert (top.signature, top.rule) == ("fa3-hopper-kernel-off-hopper", "ARCH-021")
        assert "0.0.33" in top.fix
    assert _fixture("fa3-hopper-kernel-off-hopper", name, "NVIDIA H100 80GB HBM3") == []
    hopper = explain.PREDICATES["hopper_gpus"]
    assert hopper({"ccs": "9.0"}) and not hopper({"ccs": "9.0 12.0"}) and not hopper({})


def test_tensorrt_refusal_names_the_sm_when_the_release_prints_it() -> None:
    (named,) = _fixture("tensorrt-release-lacks-gpu-sm", "match_trtllm_v100_sm70.log")
    assert named.rule == "ARCH-020" and "SM 70" in named.message
    (older,) = _fixture("tensorrt-release-lacks-gpu-sm", "match_tensorrtx_rtx4090_trt82.log")
    assert older.rule == "ARCH-020" and "{" not in older.message + older.fix


def test_a_cut_library_is_named_in_the_message_and_the_fix() -> None:
    (top,) = _fixture("shared-lib-truncated", "match_next_swc_published_truncated.log")
    lib = "test/node_modules/@next/swc-linux-arm64-gnu/next-swc.linux-arm64-gnu.node"
    assert top.rule == "ARCH-022" and lib in top.message and lib in top.fix
