"""NVIDIA Warp's start-up banner: the CUDA the driver supports and each CUDA device.

    Warp 1.10.0 initialized:
       CUDA Toolkit 12.8, Driver 13.0
       Devices:
         "cpu"      : "x86_64"
         "cuda:0"   : "NVIDIA GeForce RTX 5090" (32 GiB, sm_120, mempool enabled)

"Driver" is the driver's CUDA version (cuDriverGetVersion); "CUDA Toolkit" the one Warp was built
with, not an installed toolkit. Without a driver Warp prints "Driver 0.0 (insufficient CUDA driver
version!)", which says nothing about the driver's CUDA. The memory is rounded to GiB and not read.
"""

from __future__ import annotations

import re

from checks.facts.model import Gpu, HostFacts
from checks.facts.parsers import Format
from checks.facts.probe import Probe

_BANNER = re.compile(r"^Warp \d{1,3}\.\d{1,3}\.\d{1,3}\S{0,40} initialized:[ \t]*$", re.MULTILINE)
_VERSIONS = re.compile(
    r"^[ \t]{1,12}CUDA Toolkit \d{1,3}\.\d{1,3}, Driver (\d{1,3})\.(\d{1,3})\b", re.MULTILINE
)
_DEVICE = re.compile(
    r'^[ \t]{1,16}"cuda:(\d{1,3})"[ \t]{0,20}:[ \t]{0,4}"([^"\n]{1,200})"'
    r"(?:[ \t]{0,4}\((?:\d{1,5} GiB, )?sm_(\d{1,2})(\d)[a-z]?\b)?",
    re.MULTILINE,
)


def parse_warp(text: str) -> HostFacts:
    """The driver's CUDA version and one Gpu per "cuda:N" device of Warp's banner."""
    facts = HostFacts()
    if _BANNER.search(text) is None:
        return facts
    versions = _VERSIONS.search(text)
    if versions is not None and versions.group(1) != "0":
        facts.driver.cuda_version = f"{int(versions.group(1))}.{int(versions.group(2))}"
    for device in _DEVICE.finditer(text):
        index, name, major, minor = device.groups()
        capability = f"{int(major)}.{minor}" if major is not None else None
        facts.gpus.append(Gpu(index=int(index), name=name.strip() or None,
                              compute_capability=capability))  # fmt: skip
    return facts


def detect_warp(text: str) -> bool:
    return _BANNER.search(text) is not None


FORMATS = [Format("Warp banner", detect_warp, parse_warp)]

# No probe: Warp prints this when a program imports it.
PROBES: list[Probe] = []
