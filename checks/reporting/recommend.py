"""What to build and pull for a host: llama.cpp arch flags, an nvcc, a vLLM image family, a wheel.

Each recommendation names the rules and tables that drove it, so it can be checked by hand.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from packaging.version import Version

from checks import coverage, versions
from checks.facts.model import HostFacts, Toolkit
from checks.matrix import registry
from checks.matrix.host import gpus_with_cc, host_driver, host_driver_cuda, toolkit_label


@dataclass(frozen=True)
class Recommendation:
    """`value` is what to use; `detail` says why; `basis` names rules and tables."""

    topic: str
    value: str
    detail: str
    basis: tuple[str, ...] = field(default_factory=tuple)


def recommend(facts: HostFacts) -> list[Recommendation]:
    return [llama_cpp_flags(facts), nvcc(facts), vllm_image(facts), torch_index(facts)]


def _ccs(facts: HostFacts) -> list[tuple[int, int]]:
    return sorted({cc for _, cc in gpus_with_cc(facts)})


def _unknown_cc(facts: HostFacts) -> bool:
    return any(coverage.cc_tuple(g.compute_capability) is None for g in facts.gpus)


def cuda_architectures(facts: HostFacts) -> list[str] | None:
    """CMAKE_CUDA_ARCHITECTURES entries for this host's GPUs; [] without a GPU, None if unknown."""
    if _unknown_cc(facts):
        return None
    archs = []
    for major, minor in _ccs(facts):
        info = registry.arch_info(f"{major}.{minor}")
        archs.append(info["cmake"] if info else f"{major}{minor}")
    return archs


def llama_cpp_flags(facts: HostFacts) -> Recommendation:
    topic = "llama.cpp CMake flags"
    if not facts.gpus:
        return Recommendation(
            topic, "-DGGML_CUDA=OFF", "no NVIDIA GPU found: build CPU-only", ("GPU-001",)
        )
    archs = cuda_architectures(facts)
    if archs is None:
        return Recommendation(
            topic, "unknown", "the compute capability of some GPU is unknown", ("table:archs",)
        )
    value = f"-DGGML_CUDA=ON -DGGML_NATIVE=OFF -DCMAKE_CUDA_ARCHITECTURES={';'.join(archs)}"
    detail = "only the architectures this host's GPUs need; Blackwell needs the 'a' targets"
    return Recommendation(topic, value, detail, ("table:archs", "ARCH-002", "LCPP-003"))


def good_toolkits(facts: HostFacts) -> list[Toolkit]:
    """Installed CUDA toolkits the matrix considers good for every GPU here."""
    ccs = _ccs(facts)
    return [t for t in facts.toolkits if _toolkit_ok(t, ccs)]


@functools.cache
def _known_bad_nvcc() -> dict[tuple[int, int], tuple[str, set[str], set[str]]]:
    """Per compute capability: the rule, the nvcc releases it names, and the updates that are fixed.

    Read from the nvcc_known_bad rules (LCPP-001, LCPP-002), so the matrix says it once.
    """
    out = {}
    for rule in registry.rules():
        cc = coverage.cc_tuple(rule.params.get("compute_capability"))
        if rule.check == "nvcc_known_bad" and cc is not None:
            good = set(rule.params.get("good_updates", []))
            out[cc] = (rule.id, set(rule.params["releases"]), good)
    return out


def _allowed(release: Version, ccs: list[tuple[int, int]]) -> tuple[bool, str | None]:
    """Whether nvcc `release` can build for every compute capability; else the rule against it."""
    short = Version(f"{release.major}.{release.minor}")
    known_bad = _known_bad_nvcc()
    for cc in ccs:
        info = registry.arch_info(f"{cc[0]}.{cc[1]}")
        if info is None:
            continue
        if short < Version(info["first_cuda"]):
            return False, "table:archs"
        if "last_cuda" in info and short > Version(info["last_cuda"]):
            return False, "table:archs"
        bad = known_bad.get(cc)
        if bad and str(short) in bad[1] and str(release) not in bad[2]:
            return False, bad[0]
    return True, None


def nvcc(facts: HostFacts) -> Recommendation:
    topic = "CUDA toolkit (nvcc) for building"
    ccs = _ccs(facts)
    if not facts.gpus:
        return Recommendation(topic, "none needed", "CPU-only build", ("GPU-001",))
    if _unknown_cc(facts):
        return Recommendation(topic, "unknown", "GPU compute capability unknown", ("table:archs",))
    basis = {"table:cuda", "table:archs"}
    usable = []
    for release, minimum in registry.cuda_releases():
        ok, rule = _allowed(release, ccs)
        if rule:
            basis.add(rule)
        if ok:
            usable.append((release, minimum))
    if not usable:
        return Recommendation(topic, "none", "no CUDA release builds for all these GPUs", ())
    driver = host_driver(facts)
    runnable = [(r, m) for r, m in usable if driver is None or m <= driver[1]]
    if runnable:
        release, minimum = runnable[-1]
        detail = (
            f"newest release that builds for every GPU here and runs on driver {driver[0]}"
            if (driver)
            else "newest release that builds for every GPU here (driver unknown)"
        )
    else:
        release, minimum = usable[0]
        detail = f"needs driver {minimum} or newer: upgrade the driver first"
        basis.add("DRV-001")
    installed = good_toolkits(facts)
    if installed:
        detail += f"; installed and good: {', '.join(toolkit_label(t) for t in installed)}"
    return Recommendation(topic, f"CUDA {release}", detail, tuple(sorted(basis)))


def _toolkit_ok(toolkit: Toolkit, ccs: list[tuple[int, int]]) -> bool:
    """An installed toolkit is good when its update (or, unknown, its release) is allowed."""
    release = versions.cuda(toolkit.update) or versions.release(toolkit.release or toolkit.version)
    return release is not None and _allowed(release, ccs)[0]


def vllm_image(facts: HostFacts) -> Recommendation:
    topic = "vLLM image family"
    if not facts.gpus:
        return Recommendation(topic, "none", "no NVIDIA GPU found", ("GPU-001",))
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
    if not facts.gpus:
        return Recommendation(
            topic, "https://download.pytorch.org/whl/cpu", "no NVIDIA GPU found", ("GPU-001",)
        )
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
