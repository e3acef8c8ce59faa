"""What to build and pull for a host: llama.cpp arch flags, an nvcc, a vLLM image family, a wheel.

Each recommendation names the rules and tables that drove it, so it can be checked by hand. An
nvcc is recommended only when checks.matrix.toolkits calls it good, the same test the rules apply.
While the driver is installed but broken, every recommendation waits for it: what the GPUs need is
unknown, and the host is never taken for one without a GPU.

On a Jetson the L4T release decides (tables/jetson.toml): the CUDA its JetPack ships, NVIDIA's
Jetson PyTorch and vLLM builds for it, never a desktop driver, index or image; unknown while the
L4T release is.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from packaging.version import Version

from checks import coverage
from checks.facts.model import Driver, HostFacts
from checks.matrix import engine, evaluators, registry, toolkits
from checks.matrix.engine import Finding
from checks.matrix.host import (
    gpus_looked_for,
    gpus_with_cc,
    host_driver,
    host_driver_cuda,
    is_jetson,
    toolkit_label,
)

WAIT_FOR_DRIVER = "unknown until the driver works"
JETSON_BASIS = ("table:jetson",)

# The installed toolkits good for the host's GPUs and driver: what the gate may build with.
good_toolkits = toolkits.good_toolkits


@dataclass(frozen=True)
class Recommendation:
    """`value` is what to use; `detail` says why; `basis` names rules and tables."""

    topic: str
    value: str
    detail: str
    basis: tuple[str, ...] = field(default_factory=tuple)


def recommend(facts: HostFacts) -> list[Recommendation]:
    return [llama_cpp_flags(facts), nvcc(facts), vllm_image(facts), torch_index(facts)]


def broken_driver(facts: HostFacts) -> Finding | None:
    """The error finding that says the NVIDIA driver is installed but lists no GPU (a version
    mismatch, a loaded module that shows none, Secure Boot refusing it); None when GPUs are
    listed or nothing says so."""
    if facts.gpus:
        return None
    rules = tuple(r for r in registry.routed("host") if r.check in evaluators.DRIVER_FAULTS)
    return next((f for f in engine.evaluate(facts, rules) if f.severity == "error"), None)


def _wait_for_driver(topic: str, fault: Finding) -> Recommendation:
    detail = (
        f"the NVIDIA driver is broken ({fault.rule}: {fault.title}): fix it as {fault.rule} "
        "says, then check again"
    )
    return Recommendation(topic, WAIT_FOR_DRIVER, detail, (fault.rule,))


def _ccs(facts: HostFacts) -> list[tuple[int, int]]:
    return sorted({cc for _, cc in gpus_with_cc(facts)})


def _unknown_cc(facts: HostFacts) -> bool:
    return any(coverage.cc_tuple(g.compute_capability) is None for g in facts.gpus)


def _without_gpus(topic: str, value: str, detail: str, facts: HostFacts) -> Recommendation:
    """The CPU-only advice where NVML or nvidia-smi found no GPU; unknown where nothing looked
    (a capture that names no GPU says nothing of the host's GPUs)."""
    if gpus_looked_for(facts):
        return Recommendation(topic, value, detail, ("GPU-001",))
    return Recommendation(topic, "unknown", "no GPU named in what was read", ())


def _unnamed_jetson(facts: HostFacts) -> bool:
    """A Jetson known by its L4T or JetPack release alone: its GPU is there, but not named."""
    return not facts.gpus and is_jetson(facts)


def _jetson(facts: HostFacts) -> tuple[dict[str, Any] | None, str]:
    """The Jetson table's row for this board and how to name it ("L4T 36.4.3, JetPack 6.2"), or
    None and why the table says nothing."""
    system = facts.system
    row = registry.jetson_release(system.l4t_release, system.jetpack_release)
    if row is None:
        if system.l4t_release:
            return None, f"L4T {system.l4t_release} is not in the Jetson table"
        if system.jetpack_release:
            return None, f"JetPack {system.jetpack_release} is not in the Jetson table"
        return None, "L4T release not read (cat /etc/nv_tegra_release tells it)"
    names = [f"L4T {system.l4t_release}"] if system.l4t_release else []
    names.append(f"JetPack {system.jetpack_release or row['family_name'].split()[-1]}")
    return row, ", ".join(names)


def cuda_architectures(facts: HostFacts) -> list[str] | None:
    """CMAKE_CUDA_ARCHITECTURES entries for this host's GPUs; [] without a GPU, None if unknown
    (as on a Jetson whose module is not named). [] also while a broken driver hides the GPUs: ask
    broken_driver first."""
    if _unknown_cc(facts) or _unnamed_jetson(facts):
        return None
    archs = []
    for major, minor in _ccs(facts):
        info = registry.arch_info(f"{major}.{minor}")
        archs.append(info["cmake"] if info else f"{major}{minor}")
    return archs


def llama_cpp_flags(facts: HostFacts) -> Recommendation:
    topic = "llama.cpp CMake flags"
    if fault := broken_driver(facts):
        return _wait_for_driver(topic, fault)
    if _unnamed_jetson(facts):
        detail = "a Jetson whose module is not named: its GPU's compute capability is unknown"
        return Recommendation(topic, "unknown", detail, ("table:archs", *JETSON_BASIS))
    if not facts.gpus:
        return _without_gpus(topic, "-DGGML_CUDA=OFF", "no NVIDIA GPU found: build CPU-only", facts)
    archs = cuda_architectures(facts)
    if archs is None:
        return Recommendation(
            topic, "unknown", "the compute capability of some GPU is unknown", ("table:archs",)
        )
    value = f"-DGGML_CUDA=ON -DGGML_NATIVE=OFF -DCMAKE_CUDA_ARCHITECTURES={';'.join(archs)}"
    detail = "only the architectures this host's GPUs need; Blackwell needs the 'a' targets"
    return Recommendation(topic, value, detail, ("table:archs", "ARCH-002", "LCPP-003"))


@dataclass(frozen=True)
class _Choice:
    """The CUDA release to build with: `good` when checks.matrix.toolkits finds nothing against
    it on this host as it is (else it is what to use after a driver upgrade)."""

    release: Version
    good: bool
    detail: str
    basis: frozenset[str]


def _choose(facts: HostFacts) -> _Choice | None:
    """The newest good release whose own driver the host meets, else the oldest good one, else
    the oldest that builds for the GPUs once the driver is new enough; None if none builds."""
    basis = {"table:cuda", "table:archs"}
    judged = [(r, m, toolkits.faults(facts, str(r))) for r, m in registry.cuda_releases()]
    basis.update(f for *_, found in judged for f in found)
    good = [(r, m) for r, m, found in judged if not found]
    driver = host_driver(facts)
    runnable = [(r, m) for r, m in good if driver is None or m <= driver[1]]
    if runnable:
        release, _ = runnable[-1]
        detail = (
            f"newest release that builds for every GPU here and runs on driver {driver[0]}"
            if driver
            else "newest release that builds for every GPU here (driver unknown)"
        )
        return _Choice(release, True, detail, frozenset(basis))
    if good:
        release, minimum = good[0]
        detail = f"needs driver {minimum} or newer: upgrade the driver first"
        return _Choice(release, True, detail, frozenset(basis | {"DRV-002"}))
    if facts.system.gcc_version and any("BUILD-004" in found for *_, found in judged):
        return _with_older_gcc(facts)
    driverless = dataclasses.replace(facts, driver=Driver())
    builds = [
        (r, m) for r, m in registry.cuda_releases() if not toolkits.faults(driverless, str(r))
    ]
    if not builds:
        return None
    release, minimum = builds[0]
    detail = f"needs driver {minimum} or newer: upgrade the driver first"
    return _Choice(release, False, detail, frozenset(basis))


def _with_older_gcc(facts: HostFacts) -> _Choice | None:
    """What to build with when every release that would do refuses the host's gcc: the release
    chosen as if gcc were unknown, with the older gcc it accepts as nvcc's host compiler."""
    system = dataclasses.replace(facts.system, gcc_version=None)
    chosen = _choose(dataclasses.replace(facts, system=system))
    if chosen is None or not chosen.good:
        return chosen
    accepted = toolkits.rejected_gcc(str(chosen.release), facts.system.gcc_version)
    if accepted is None:
        return chosen
    gcc = facts.system.gcc_version
    detail = (
        f"refuses the host's gcc {gcc}: install gcc-{accepted} and g++-{accepted} and build"
        f" with -DCMAKE_CUDA_HOST_COMPILER=/usr/bin/g++-{accepted}"
    )
    return _Choice(chosen.release, False, detail, chosen.basis | {"BUILD-004"})


def _installed_good(facts: HostFacts) -> str:
    installed = good_toolkits(facts)
    return (
        f"; installed and good: {', '.join(toolkit_label(t) for t in installed)}"
        if installed
        else ""
    )


def _jetson_nvcc(facts: HostFacts, topic: str) -> Recommendation:
    """The CUDA of the board's JetPack: it comes with its L4T release, never a desktop one."""
    row, name = _jetson(facts)
    if row is None:
        reported = facts.driver.cuda_version
        detail = f"{name}; a Jetson's CUDA comes with its JetPack" + (
            f" (the driver reports CUDA {reported})" if reported else ""
        )
        return Recommendation(topic, "unknown", detail + _installed_good(facts), JETSON_BASIS)
    detail = (
        f"the CUDA of {name}: it comes with JetPack (SDK Manager or the nvidia-jetpack packages),"
        f" not NVIDIA's desktop installers; {row['cuda_note']}"
    )
    return Recommendation(
        topic, f"CUDA {row['cuda']}", detail + _installed_good(facts), JETSON_BASIS
    )


def nvcc(facts: HostFacts) -> Recommendation:
    topic = "CUDA toolkit (nvcc) for building"
    if fault := broken_driver(facts):
        return _wait_for_driver(topic, fault)
    if is_jetson(facts):
        return _jetson_nvcc(facts, topic)
    if not facts.gpus:
        return _without_gpus(topic, "none needed", "CPU-only build", facts)
    if _unknown_cc(facts):
        return Recommendation(topic, "unknown", "GPU compute capability unknown", ("table:archs",))
    choice = _choose(facts)
    if choice is None:
        return Recommendation(topic, "none", "no CUDA release builds for all these GPUs", ())
    detail = choice.detail + _installed_good(facts)
    return Recommendation(topic, f"CUDA {choice.release}", detail, tuple(sorted(choice.basis)))


def build_release(facts: HostFacts) -> str:
    """The CUDA release to install for building llama.cpp here ("12.9.1"): the recommended one,
    only when it is good on this host as it is; else why there is none, in words (on a Jetson,
    whose CUDA comes with JetPack, always)."""
    rec = nvcc(facts)
    if not rec.value.startswith("CUDA "):
        return f"{rec.value} ({rec.detail})"
    if is_jetson(facts):
        return f"none to install on a Jetson: {rec.value} ({rec.detail})"
    choice = _choose(facts)
    if choice is None:
        return f"{rec.value} ({rec.detail})"
    if not choice.good:
        return f"none good on this host as it is: CUDA {choice.release} {choice.detail}"
    return str(choice.release)


def _jetson_pick(facts: HostFacts, topic: str, key: str, unknown: str) -> Recommendation:
    """The Jetson table's `key` ("torch", "vllm") for this board, with its note; else unknown."""
    row, name = _jetson(facts)
    if row is None:
        return Recommendation(topic, "unknown", f"{name}: {unknown}", JETSON_BASIS)
    return Recommendation(topic, row[key], f"{name}: {row[key + '_note']}", JETSON_BASIS)


def vllm_image(facts: HostFacts) -> Recommendation:
    topic = "vLLM image family"
    if fault := broken_driver(facts):
        return _wait_for_driver(topic, fault)
    if is_jetson(facts):
        return _jetson_pick(facts, topic, "vllm", "a Jetson runs the vLLM build of its JetPack")
    if not facts.gpus:
        return _without_gpus(topic, "none", "no NVIDIA GPU found", facts)
    driver_cuda = host_driver_cuda(facts)
    if driver_cuda is None:
        return Recommendation(topic, "unknown", "driver version unknown", ("table:vllm_images",))
    basis = ("table:vllm_images", "CTR-001", "CTR-002")
    for family in registry.table("vllm_images")["family"]:
        if Version(family["cuda"]) <= driver_cuda:
            detail = f"driver supports CUDA {driver_cuda}; {family['tag']}"
            return Recommendation(topic, family["name"], detail, basis)
    oldest = registry.table("vllm_images")["family"][-1]
    minimum = registry.cuda_minimum_driver(Version(oldest["cuda"]))
    detail = f"driver supports CUDA {driver_cuda}; current images need driver {minimum} or newer"
    return Recommendation(topic, "none (upgrade the driver)", detail, basis)


def torch_index(facts: HostFacts) -> Recommendation:
    topic = "PyTorch wheel index"
    if fault := broken_driver(facts):
        return _wait_for_driver(topic, fault)
    if is_jetson(facts):
        return _jetson_pick(facts, topic, "torch", "a Jetson takes the PyTorch of its JetPack")
    if not facts.gpus:
        cpu = "https://download.pytorch.org/whl/cpu"
        return _without_gpus(topic, cpu, "no NVIDIA GPU found", facts)
    if _unknown_cc(facts):
        return Recommendation(topic, "unknown", "GPU compute capability unknown", ("table:torch",))
    basis = ("table:torch_wheels", "ARCH-001", "ARCH-003")
    wheel = registry.torch_wheel_for(_ccs(facts), host_driver_cuda(facts))
    if wheel is None:
        return Recommendation(
            topic, "none", "no published wheel covers these GPUs on this driver", basis
        )
    detail = f"torch{wheel['torch']} built with CUDA {wheel['cuda']} covers every GPU here"
    return Recommendation(topic, registry.torch_index_url(wheel), detail, basis)
