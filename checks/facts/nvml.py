"""The local fast path: driver and GPU facts read through NVML (pynvml), without nvidia-smi.

pynvml is imported inside `read` so that importing this module stays cheap.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from checks.facts.model import Gpu, HostFacts
from checks.facts.probe import ProbeUnavailable

# nvmlBrandType_t (nvml.h) as nvidia-smi prints it in "Product Brand".
BRANDS = {
    1: "Quadro",
    2: "Tesla",
    3: "NVS",
    4: "GRID",
    5: "GeForce",
    6: "Titan",
    7: "NVIDIA Virtual Applications",
    8: "NVIDIA Virtual PC",
    9: "NVIDIA Virtual Compute Server",
    10: "NVIDIA RTX Virtual Workstation",
    11: "NVIDIA Cloud Gaming",
    12: "Quadro RTX",
    13: "NVIDIA RTX",
    14: "NVIDIA",
    15: "GeForce RTX",
    16: "Titan RTX",
}

# nvmlDeviceArchitecture_t (nvml.h).
ARCHITECTURES = {
    2: "Kepler",
    3: "Maxwell",
    4: "Pascal",
    5: "Volta",
    6: "Turing",
    7: "Ampere",
    8: "Ada",
    9: "Hopper",
    10: "Blackwell",
    13: "Rubin",
}

_LIBRARY_NOT_FOUND = 12  # NVML_ERROR_LIBRARY_NOT_FOUND
_FEATURE_ENABLED = 1  # NVML_FEATURE_ENABLED, NVML_DEVICE_MIG_ENABLE

T = TypeVar("T")


def brand_name(brand: int | None) -> str | None:
    """An NVML_BRAND_* value as its product brand name; unknown values give None."""
    return BRANDS.get(brand) if brand is not None else None


def architecture_name(arch: int | None) -> str | None:
    """An NVML_DEVICE_ARCH_* value as an architecture name; unknown values give None."""
    return ARCHITECTURES.get(arch) if arch is not None else None


def cuda_version(value: int | None) -> str | None:
    """The driver API's CUDA version integer as "major.minor": 12080 -> "12.8"."""
    if value is None or value <= 0:
        return None
    return f"{value // 1000}.{(value % 1000) // 10}"


def nvml_version(value: str | None) -> str | None:
    """NVML's version without its API prefix: "12.570.124.06" -> "570.124.06"."""
    if not value:
        return None
    parts = value.strip().split(".")
    if len(parts) >= 3 and parts[0].isdigit() and int(parts[0]) < 100:
        parts = parts[1:]
    return ".".join(parts) or None


def enabled(value: int | None) -> str | None:
    """An NVML feature state as "Enabled" / "Disabled"."""
    if value is None:
        return None
    return "Enabled" if value == _FEATURE_ENABLED else "Disabled"


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    text = str(value).strip()
    return text or None


def _guard(error: type[Exception], call: Callable[[], T]) -> T | None:
    try:
        return call()
    except error:
        return None


def _device(nvml: Any, index: int) -> Gpu:
    guard = _guard
    error = nvml.NVMLError
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    pci = guard(error, lambda: nvml.nvmlDeviceGetPciInfo(handle))
    cc = guard(error, lambda: nvml.nvmlDeviceGetCudaComputeCapability(handle))
    memory = guard(error, lambda: nvml.nvmlDeviceGetMemoryInfo(handle))
    mig = guard(error, lambda: nvml.nvmlDeviceGetMigMode(handle))
    return Gpu(
        index=index,
        name=_text(guard(error, lambda: nvml.nvmlDeviceGetName(handle))),
        pci_bus_id=_text(getattr(pci, "busId", None)),
        uuid=_text(guard(error, lambda: nvml.nvmlDeviceGetUUID(handle))),
        serial=_text(guard(error, lambda: nvml.nvmlDeviceGetSerial(handle))),
        compute_capability=f"{cc[0]}.{cc[1]}" if cc else None,
        memory_total_mib=int(memory.total) // (1024 * 1024) if memory is not None else None,
        brand=brand_name(guard(error, lambda: nvml.nvmlDeviceGetBrand(handle))),
        architecture=architecture_name(
            guard(error, lambda: nvml.nvmlDeviceGetArchitecture(handle))
        ),
        mig_mode=enabled(mig[0]) if mig else None,
        persistence_mode=enabled(guard(error, lambda: nvml.nvmlDeviceGetPersistenceMode(handle))),
    )


def read() -> HostFacts:
    """Driver, CUDA and per-GPU facts from NVML on this machine.

    Raises ProbeUnavailable when the NVML library is absent; any other init failure (such as a
    driver/library version mismatch) comes back as driver.nvml_error.
    """
    try:
        import pynvml
    except ImportError as exc:
        raise ProbeUnavailable("pynvml is not installed") from exc
    facts = HostFacts()
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        if getattr(exc, "value", None) == _LIBRARY_NOT_FOUND:
            raise ProbeUnavailable("NVML library not found") from exc
        facts.driver.nvml_error = _text(str(exc)) or "NVML initialisation failed"
        return facts
    try:
        error = pynvml.NVMLError
        facts.driver.version = _text(_guard(error, pynvml.nvmlSystemGetDriverVersion))
        facts.driver.cuda_version = cuda_version(
            _guard(error, pynvml.nvmlSystemGetCudaDriverVersion_v2)
        )
        facts.driver.nvml_library_version = nvml_version(
            _text(_guard(error, pynvml.nvmlSystemGetNVMLVersion))
        )
        count = _guard(error, pynvml.nvmlDeviceGetCount) or 0
        for index in range(count):
            try:
                facts.gpus.append(_device(pynvml, index))
            except error:
                facts.gpus.append(Gpu(index=index))
    finally:
        _guard(pynvml.NVMLError, pynvml.nvmlShutdown)
    return facts
