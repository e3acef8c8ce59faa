"""NVML fast path: the pure mappings, the no-library path, and (on a GPU host) a real read."""

from __future__ import annotations

import ctypes.util
import shutil
import subprocess
import sys

import pytest

from checks.facts import nvml
from checks.facts.probe import ProbeUnavailable


def _has_gpu() -> bool:
    return (
        ctypes.util.find_library("nvidia-ml") is not None and shutil.which("nvidia-smi") is not None
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [(12080, "12.8"), (11040, "11.4"), (13000, "13.0"), (12020, "12.2"), (0, None), (None, None)],
)
def test_cuda_version(value: int | None, expected: str | None) -> None:
    assert nvml.cuda_version(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("12.570.124.06", "570.124.06"),
        ("570.124", "570.124"),
        ("13.610.43.02", "610.43.02"),
        ("", None),
        (None, None),
    ],
)
def test_nvml_version(value: str | None, expected: str | None) -> None:
    assert nvml.nvml_version(value) == expected


def test_brand_and_architecture_names() -> None:
    assert nvml.brand_name(5) == "GeForce"
    assert nvml.brand_name(13) == "NVIDIA RTX"
    assert nvml.brand_name(2) == "Tesla"
    assert nvml.brand_name(14) == "NVIDIA"
    assert nvml.brand_name(0) is None
    assert nvml.brand_name(None) is None
    assert nvml.architecture_name(8) == "Ada"
    assert nvml.architecture_name(10) == "Blackwell"
    assert nvml.architecture_name(0xFFFFFFFF) is None


def test_mappings_agree_with_pynvml_constants() -> None:
    pynvml = pytest.importorskip("pynvml")
    assert nvml.BRANDS[pynvml.NVML_BRAND_GEFORCE] == "GeForce"
    assert nvml.BRANDS[pynvml.NVML_BRAND_TESLA] == "Tesla"
    assert nvml.BRANDS[pynvml.NVML_BRAND_NVIDIA_RTX] == "NVIDIA RTX"
    assert nvml.ARCHITECTURES[pynvml.NVML_DEVICE_ARCH_ADA] == "Ada"
    assert nvml.ARCHITECTURES[pynvml.NVML_DEVICE_ARCH_HOPPER] == "Hopper"
    assert nvml.ARCHITECTURES[pynvml.NVML_DEVICE_ARCH_BLACKWELL] == "Blackwell"


def test_enabled() -> None:
    assert nvml.enabled(1) == "Enabled"
    assert nvml.enabled(0) == "Disabled"
    assert nvml.enabled(None) is None


def test_import_does_not_load_pynvml() -> None:
    code = "import sys, checks.facts.nvml; print('pynvml' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"


@pytest.mark.skipif(_has_gpu(), reason="NVML is present on this host")
def test_read_without_library_is_unavailable() -> None:
    with pytest.raises(ProbeUnavailable, match="NVML library not found"):
        nvml.read()


@pytest.mark.gpu
@pytest.mark.skipif(not _has_gpu(), reason="needs an NVIDIA GPU and its driver")
def test_read_on_a_gpu_host() -> None:
    facts = nvml.read()
    assert facts.driver.nvml_error is None
    assert facts.driver.version and facts.driver.cuda_version
    assert facts.gpus
    for gpu in facts.gpus:
        assert gpu.name and gpu.uuid and gpu.pci_bus_id
        assert gpu.compute_capability and gpu.memory_total_mib
