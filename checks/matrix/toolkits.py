"""Which CUDA toolkit (nvcc) is good for a host: one answer for the rules, the recommendation and
the gate.

An nvcc is good for a host when it can build for every GPU (tables/archs.toml) and no error rule
that judges an nvcc reports it: a compiler known to miscompile for one of the GPUs (LCPP-001,
LCPP-002), a CUDA family the driver cannot run (DRV-001), kernels the driver cannot load
(LCPP-005), a host gcc newer than it accepts (BUILD-004). Those rules' evaluators apply the
tests below, so an nvcc the recommendation or the gate calls good is never the subject of an
error finding.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from packaging.version import Version

from checks import versions
from checks.facts.model import HostFacts, Toolkit
from checks.matrix import registry
from checks.matrix.host import gpus_with_cc, host_driver


def toolkit_version(toolkit: Toolkit) -> tuple[str | None, bool]:
    """The most exact version known of a toolkit, and whether it is the toolkit's update (13.2.2,
    from its version.json) rather than nvcc's own version (13.2.51), which does not tell it."""
    return toolkit.update or toolkit.version or toolkit.release, bool(toolkit.update)


def targets(release: Version, cc: tuple[int, int]) -> bool | None:
    """Whether nvcc of CUDA X.Y can build for compute capability `cc`; None for a cc the arch
    table does not know."""
    info = registry.arch_info(f"{cc[0]}.{cc[1]}")
    if info is None:
        return None
    short = Version(f"{release.major}.{release.minor}")
    too_new = "last_cuda" in info and short > Version(info["last_cuda"])
    return Version(info["first_cuda"]) <= short and not too_new


def driver_too_old(cuda: Version, driver: Version, mode: str) -> bool | None:
    """Whether `driver` is too old for what CUDA `cuda` builds: below its major family's minimum
    (mode "family", DRV-001), or within the family but below the driver its X.Y release ships
    with (mode "release", DRV-002). None when the CUDA table does not know the family."""
    family = registry.family_minimum(cuda)
    release = registry.release_minimum(cuda) or family
    if family is None or release is None:
        return None
    if mode == "family":
        return driver < family
    return family <= driver < release


def miscompiles(nvcc: str | None, is_update: bool, params: Mapping[str, Any]) -> bool:
    """Whether an nvcc_known_bad rule (its params) names nvcc `nvcc`: its X.Y is one of
    `releases`, and it is not known to be one of the fixed `good_updates`."""
    release = versions.release(nvcc)
    if release is None or release not in {Version(r) for r in params["releases"]}:
        return False
    fixed = {Version(u) for u in params.get("good_updates", [])}
    return not (is_update and versions.cuda(nvcc) in fixed)


def compression_unloadable(
    cuda: Version, mode: str | None, driver: Version, params: Mapping[str, Any]
) -> bool:
    """Whether ggml kernels built with CUDA `cuda` and compression `mode` (None: ggml's default)
    are ones `driver` cannot load (the compression_old_driver rule's params)."""
    min_driver = versions.driver(params["min_driver"] + ".0")
    if min_driver is None or driver >= min_driver or cuda < Version(params["from_cuda"]):
        return False
    return (mode or params["default_mode"]).lower() != "none"


def gcc_limits(release: Version) -> tuple[int, int] | None:
    """(a GCC major nvcc of CUDA X.Y `release` surely accepts, the newest it can accept), from
    tables/host_compilers.toml: its own row twice; for a release between listed ones, the older
    neighbour's limit and the newer one's (a newer CUDA never accepts less). None outside."""
    rows = registry.table("host_compilers")["releases"]
    listed = sorted((Version(k), int(v["gcc_max"])) for k, v in rows.items())
    older = [limit for r, limit in listed if r <= Version(f"{release.major}.{release.minor}")]
    newer = [limit for r, limit in listed if r >= Version(f"{release.major}.{release.minor}")]
    return (older[-1], newer[0]) if older and newer else None


def gcc_major(text: str | None) -> int | None:
    """GCC's major version from its version ("16.1.1" -> 16); None when unknown."""
    match = re.match(r"(\d{1,3})\.", text or "")
    return int(match.group(1)) if match else None


def rejected_gcc(nvcc: str | None, gcc: str | None) -> int | None:
    """A GCC major nvcc `nvcc` (a CUDA version) accepts, when the host's gcc `gcc` is newer than
    it can accept, so nvcc stops the build; None when it may accept it or either is unknown."""
    release, major = versions.release(nvcc), gcc_major(gcc)
    limits = gcc_limits(release) if release is not None else None
    return limits[0] if limits is not None and major is not None and major > limits[1] else None


Judge = Callable[[HostFacts, Mapping[str, Any], str, bool], bool]


def _known_bad(facts: HostFacts, params: Mapping[str, Any], nvcc: str, is_update: bool) -> bool:
    wanted = params["compute_capabilities"]
    on_gpu = any(g.compute_capability in wanted for g in facts.gpus)
    return on_gpu and miscompiles(nvcc, is_update, params)


def _family(facts: HostFacts, params: Mapping[str, Any], nvcc: str, is_update: bool) -> bool:
    driver, cuda = host_driver(facts), versions.release(nvcc)
    if driver is None or cuda is None:
        return False
    return driver_too_old(cuda, driver[1], params["mode"]) is True


def _compression(facts: HostFacts, params: Mapping[str, Any], nvcc: str, is_update: bool) -> bool:
    driver, cuda = host_driver(facts), versions.release(nvcc)
    if driver is None or cuda is None:
        return False
    return compression_unloadable(cuda, None, driver[1], params)


def _host_gcc(facts: HostFacts, params: Mapping[str, Any], nvcc: str, is_update: bool) -> bool:
    return rejected_gcc(nvcc, facts.system.gcc_version) is not None


# The evaluators that judge a CUDA toolkit, each with the test it applies to one nvcc.
JUDGES: dict[str, Judge] = {
    "nvcc_known_bad": _known_bad,
    "driver_below_cuda": _family,
    "compression_old_driver": _compression,
    "nvcc_rejects_host_gcc": _host_gcc,
}


def faults(facts: HostFacts, nvcc: str | None, is_update: bool = True) -> list[str]:
    """What rules out building for this host with nvcc `nvcc` (a CUDA version: 12.9.1; an update
    unless `is_update` is False): "table:archs" when it cannot build for a GPU, and each error
    rule that would report it; ["unknown"] when its version is. Empty when it is good."""
    release = versions.release(nvcc)
    if nvcc is None or release is None:
        return ["unknown"]
    unbuildable = any(targets(release, cc) is False for _, cc in gpus_with_cc(facts))
    found = ["table:archs"] if unbuildable else []
    for rule in registry.routed("host"):
        judge = JUDGES.get(rule.check or "")
        if rule.severity == "error" and judge and judge(facts, rule.params, nvcc, is_update):
            found.append(rule.id)
    return found


def good(facts: HostFacts, toolkit: Toolkit) -> bool:
    """Whether llama.cpp can be built with `toolkit` for this host's GPUs, driver and gcc."""
    return not faults(facts, *toolkit_version(toolkit))


def good_toolkits(facts: HostFacts) -> list[Toolkit]:
    """The host's CUDA toolkits that are good for its GPUs, driver and gcc."""
    return [t for t in facts.toolkits if good(facts, t)]
