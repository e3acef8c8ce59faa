"""Older and other wordings of known causes: CUDA's 'invalid device function', torch's cuDNN
version check, pynvml's DriverNotLoaded, Triton's libcuda search, ptxas's refusal unprefixed."""

from __future__ import annotations

import io

from checks.logs import explain, logscan


def _signatures(data: bytes) -> list[str | None]:
    return [d.signature for d in explain.diagnose(logscan.scan(io.BytesIO(data)))]


def test_torch_arch_warning_outranks_invalid_device_function() -> None:
    log = (
        b"UserWarning: NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible "
        b"with the current PyTorch installation.\n"
        b"RuntimeError: CUDA error: invalid device function\n"
    )
    assert _signatures(log)[:2] == ["torch-arch-not-compatible", "invalid-device-function"]


def test_rocm_invalid_device_function_is_not_read_as_cuda() -> None:
    assert _signatures(b"RuntimeError: HIP error: invalid device function\n") == []


def test_cudnn_mismatch_names_both_versions() -> None:
    log = (
        b"RuntimeError: cuDNN version incompatibility: PyTorch was compiled  against (9, 19, 0) "
        b"but found runtime version (9, 8, 0)\n"
    )
    top = explain.diagnose(logscan.scan(io.BytesIO(log)))[0]
    assert top.signature == "torch-cudnn-version-mismatch"
    assert "(9, 19, 0)" in top.message and "(9, 8, 0)" in top.message


def test_tensorflow_cudnn_check_is_not_torch_s() -> None:
    log = (
        b"E cuda_dnn.cc:522] Loaded runtime CuDNN library: 9.1.0 but source was compiled with: "
        b"9.3.0.\n"
    )
    assert "torch-cudnn-version-mismatch" not in _signatures(log)


def test_ctk_driver_not_loaded_is_not_pynvml_s() -> None:
    log = b'level=error msg="failed to initialize NVML: Driver Not Loaded"\n'
    assert "nvml-driver-not-loaded" not in _signatures(log)


def test_nvcc_refusal_without_prefix_is_not_ptxas() -> None:
    log = b"Value 'sm_89' is not defined for option 'gpu-architecture'\n"
    assert "ptxas-unknown-arch" not in _signatures(log)
