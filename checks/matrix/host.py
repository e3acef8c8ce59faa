"""What the rules read of a host: its driver and the CUDA it runs, its GPUs, what uses CUDA."""

from __future__ import annotations

from collections.abc import Iterator

from packaging.version import Version

from checks import coverage, versions
from checks.facts.model import Gpu, HostFacts, LlamaCppBuild, PythonPackage, Toolkit
from checks.matrix import registry, require_cuda

GPU_PROBES = ("nvml", "nvidia-smi")


def gpus_looked_for(facts: HostFacts) -> bool:
    """Whether NVML or nvidia-smi was asked for GPUs (it ran, failed, or its error was read), so an
    empty GPU list means none was found; from a capture that names no GPU, nothing is known."""
    return bool(facts.driver.smi_error) or any(p.name in GPU_PROBES for p in facts.probes)


def is_jetson(facts: HostFacts) -> bool:
    """Whether the host is a Jetson: every GPU listed is a Jetson's integrated GPU, or none is
    listed and a Jetson Linux (L4T) or JetPack release was read."""
    if facts.gpus:
        return all(registry.jetson_integrated(g.name) for g in facts.gpus)
    return bool(facts.system.l4t_release or facts.system.jetpack_release)


def host_driver(facts: HostFacts) -> tuple[str, versions.DriverVersion] | None:
    """The host driver version: userspace first, else the loaded kernel module. None on a Jetson,
    whose driver is part of its L4T release: its number (540.4.0 runs CUDA 12.6) is no desktop
    driver branch, so no desktop driver minimum applies to it."""
    if is_jetson(facts):
        return None
    for text in (facts.driver.version, facts.driver.kernel_module_version):
        version = versions.driver(text)
        if text and version is not None:
            return text, version
    return None


def nvidia_module_loaded(facts: HostFacts) -> bool:
    """Whether the nvidia kernel module is loaded: in the module list, or its /proc version read.
    It loads only when it binds a GPU ("NVRM: No NVIDIA GPU found" otherwise), so a GPU is there."""
    loaded = facts.modules.loaded
    return bool(loaded and "nvidia" in loaded) or facts.driver.kernel_module_version is not None


def host_driver_cuda(facts: HostFacts) -> Version | None:
    """The CUDA the driver supports: as it reports it, else from the release table."""
    reported = versions.release(facts.driver.cuda_version)
    if reported is not None:
        return reported
    driver = host_driver(facts)
    return registry.driver_cuda(driver[1]) if driver else None


def gpu_label(gpu: Gpu) -> str:
    """A GPU's label: its index and name, or the name alone when the index is unknown."""
    name = gpu.name or "unknown GPU"
    return f"GPU {gpu.index} ({name})" if gpu.index is not None else name


def toolkit_label(toolkit: Toolkit) -> str:
    """How findings name a CUDA toolkit: by its path, else its version."""
    name = toolkit.path or toolkit.release or toolkit.version
    return f"CUDA toolkit {name}" if name else "a CUDA toolkit"


def llamacpp_label(build: LlamaCppBuild) -> str:
    """How findings name a llama.cpp build: by its path, else its build number."""
    name = build.path or build.version
    return f"llama.cpp build {name}" if name else "a llama.cpp build (version unknown)"


def package_label(package: PythonPackage) -> str:
    """How findings name a Python package: its name and version, as far as they are known."""
    name = package.name or "a Python package"
    return f"{name} {package.version}" if package.version else name


def gpus_with_cc(facts: HostFacts) -> Iterator[tuple[Gpu, tuple[int, int]]]:
    """Each GPU whose compute capability is known, with it as (major, minor)."""
    for gpu in facts.gpus:
        cc = coverage.cc_tuple(gpu.compute_capability)
        if cc is not None:
            yield gpu, cc


def cuda_users(facts: HostFacts) -> Iterator[tuple[str, Version]]:
    """Everything on the host built with (or building with) a CUDA version, and that version."""
    for toolkit in facts.toolkits:
        cuda = versions.release(toolkit.release or toolkit.version)
        if cuda is not None:
            yield toolkit_label(toolkit), cuda
    for package in facts.python:
        cuda = versions.release(package.cuda_version)
        if cuda is not None:
            yield package_label(package), cuda
    for build in facts.llamacpp:
        cuda = versions.release(build.cuda_compiler_version)
        if cuda is not None:
            yield llamacpp_label(build), cuda


def requirement_met(require: str, facts: HostFacts) -> bool | None:
    """Whether the NVIDIA Container Toolkit accepts NVIDIA_REQUIRE_CUDA `require` on this host;
    None when the driver, its CUDA or the GPUs are unknown."""
    driver = host_driver(facts)
    driver_cuda = host_driver_cuda(facts)
    if driver is None or driver_cuda is None:
        return None
    return require_cuda.accepts(require, driver[1], driver_cuda, facts.gpus)
