"""NVIDIA_REQUIRE_CUDA as the NVIDIA Container Toolkit reads it, before a container starts.

`cuda>=12.8 brand=geforce,driver>=535,driver<536 ...`: the image runs when, for every GPU, one
space-separated clause has all its comma-separated terms true (libnvidia-container's dsl.c).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from packaging.version import Version

from checks import versions
from checks.facts.model import Gpu

_TERM = re.compile(r"(?P<name>[a-z]+)(?P<op>[<>=!]+)(?P<value>\S+)")

# The brand names libnvidia-container compares `brand=` against, for each product brand NVML
# reports. Older toolkits know only the first six and call every other brand "unknown"; both
# spellings are kept, since the published NVIDIA_REQUIRE_CUDA strings list them together.
_DSL_BRANDS = {
    "geforce": {"geforce"},
    "titan": {"titan"},
    "quadro": {"quadro"},
    "tesla": {"tesla"},
    "nvs": {"nvs"},
    "grid": {"grid"},
    "geforce rtx": {"geforcertx", "unknown"},
    "titan rtx": {"titanrtx", "unknown"},
    "quadro rtx": {"quadrortx", "unknown"},
    "nvidia rtx": {"nvidiartx", "unknown"},
    "nvidia": {"nvidia", "unknown"},
    "nvidia virtual applications": {"vapps", "unknown"},
    "nvidia virtual pc": {"vpc", "unknown"},
    "nvidia virtual compute server": {"vcs", "unknown"},
    "nvidia rtx virtual workstation": {"vws", "unknown"},
    "nvidia cloud gaming": {"cloudgaming", "unknown"},
}
# When only the class is known: the brands a GPU of that class reports.
_CLASS_BRANDS = {
    "consumer": {"geforce", "geforcertx", "titan", "titanrtx"},
    "workstation": {"quadro", "quadrortx", "nvidiartx", "unknown"},
    "datacenter": {"tesla", "nvidia", "unknown"},
}


def _dsl_brands(gpu: Gpu) -> set[str] | None:
    """The names `brand=` may match for this GPU; None when neither brand nor class is known."""
    if gpu.brand:
        found = _DSL_BRANDS.get(" ".join(gpu.brand.lower().split()))
        if found is not None:
            return found
    return _CLASS_BRANDS.get(gpu.brand_class or "")


def _compare(left: Version, op: str, right: Version) -> bool | None:
    results = {
        "=": left == right,
        "!=": left != right,
        "<": left < right,
        "<=": left <= right,
        ">": left > right,
        ">=": left >= right,
    }
    return results.get(op)


def _term(term: str, driver: Version, driver_cuda: Version, gpu: Gpu) -> bool | None:
    """One `name op value` term for one GPU; None when a fact it needs is unknown."""
    match = _TERM.fullmatch(term)
    if match is None:
        return None
    name, op, value = match.group("name"), match.group("op"), match.group("value")
    if name == "brand":
        brands = _dsl_brands(gpu)
        if brands is None or op not in ("=", "!="):
            return None
        return (value.lower() in brands) == (op == "=")
    if name == "arch":
        ours, theirs = versions.cuda(gpu.compute_capability), versions.cuda(value)
    elif name == "cuda":
        ours, theirs = driver_cuda, versions.cuda(value)
    elif name == "driver":
        ours, theirs = driver, versions.parse(value)
    else:
        return None
    if ours is None or theirs is None:
        return None
    return _compare(ours, op, theirs)


def _all(values: Iterator[bool | None]) -> bool | None:
    seen = list(values)
    if False in seen:
        return False
    return True if all(v is True for v in seen) else None


def _any(values: Iterator[bool | None]) -> bool | None:
    seen = list(values)
    if True in seen:
        return True
    return False if all(v is False for v in seen) else None


def accepts(
    require: str, driver: Version, driver_cuda: Version, gpus: Sequence[Gpu]
) -> bool | None:
    """Whether the toolkit accepts NVIDIA_REQUIRE_CUDA `require` for these GPUs on this driver.

    Space-separated clauses are ORed and comma-separated terms ANDed, for every GPU (as
    libnvidia-container's dsl.c does). None when a fact the answer depends on is unknown.
    """
    if not gpus:
        return None
    clauses = [c.split(",") for c in require.split() if c]
    return _all(
        _any(_all(_term(t, driver, driver_cuda, gpu) for t in c if t) for c in clauses)
        for gpu in gpus
    )
