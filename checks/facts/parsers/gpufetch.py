"""gpufetch's list of the GPUs it saw but could not use: each one's vendor and PCI id.

A gpufetch built without a backend for the GPU prints "[ERROR]: No GPU was detected! Available
GPUs are:", then "- GPU 0:", "  * Vendor: NVIDIA", "  * PCI id: 10de:21c4" per GPU
(NixOS/nixpkgs#516500). Only NVIDIA's ids are kept; a paste holding the list twice is read once.
"""

from __future__ import annotations

import re

from checks.facts.model import Gpu, HostFacts
from checks.facts.parsers import Format
from checks.facts.probe import Probe

_HEAD = "No GPU was detected! Available GPUs are:"
_GPU = re.compile(r"- GPU (\d{1,3}):")
_VENDOR = re.compile(r"\* Vendor: (\S[^\n]{0,40})")
_PCI_ID = re.compile(r"\* PCI id: ([0-9a-fA-F]{4}):([0-9a-fA-F]{4})")


def _listed(lines: list[str]) -> list[Gpu]:
    """The GPUs in the lines under the list's head, up to the first line of anything else."""
    gpus: list[Gpu] = []
    vendor: str | None = None
    for line in (raw.strip() for raw in lines):
        if (head := _GPU.fullmatch(line)) is not None:
            gpus.append(Gpu(index=int(head.group(1))))
            vendor = None
        elif gpus and (found := _VENDOR.fullmatch(line)) is not None:
            vendor = found.group(1).strip()
        elif gpus and (found := _PCI_ID.fullmatch(line)) is not None:
            pci = f"{found.group(1)}:{found.group(2)}".lower()
            if vendor == "NVIDIA" and pci.startswith("10de:"):
                gpus[-1].pci_device_id = pci
        else:
            break
    return [gpu for gpu in gpus if gpu.pci_device_id is not None]


def parse_gpufetch(text: str) -> HostFacts:
    """gpufetch's "Available GPUs are:" list: NVIDIA GPUs by index and PCI id."""
    facts = HostFacts()
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.rstrip().endswith(_HEAD):
            facts.gpus = _listed(lines[i + 1 : i + 1 + 4 * 64])
            if facts.gpus:
                break
    return facts


def detect_gpufetch(text: str) -> bool:
    return _HEAD in text and bool(parse_gpufetch(text).gpus)


FORMATS = [Format("gpufetch", detect_gpufetch, parse_gpufetch)]

# No probe: read from a paste.
PROBES: list[Probe] = []
