"""nvtop's screen pasted as text: one header per device, two or more to a line on a wide terminal
(Comfy-Org/ComfyUI#6778, Syllo/nvtop#243):

     Device 0 [NVIDIA GeForce RTX 4090] PCIe GEN 1@16x RX: 50.00 KiB/s TX: 0.000 KiB/s Device 1 [...

nvtop shows AMD and Intel GPUs too, so a device counts only when the GPU catalogue knows its name;
an integrated GPU has no "PCIe GEN" after its name and is never read.
"""

from __future__ import annotations

import re

from checks.facts import gpus
from checks.facts.model import Gpu, HostFacts
from checks.facts.parsers import Format
from checks.facts.probe import Probe

_HEADER = re.compile(
    r"(?:^|[ \t])Device (\d{1,2}) \[([^\[\]\n]{1,100})\][ \t]{1,40}PCIe GEN ", re.MULTILINE
)


def parse_nvtop(text: str) -> HostFacts:
    """One Gpu, with nvtop's device number as its index, per header naming a known GPU."""
    facts = HostFacts()
    seen: set[int] = set()
    for header in _HEADER.finditer(text):
        index, name = int(header.group(1)), header.group(2).strip()
        if index in seen:  # a later screen of the same devices
            continue
        seen.add(index)
        if gpus.lookup(name) is not None:
            facts.gpus.append(Gpu(index=index, name=name))
    return facts


def detect_nvtop(text: str) -> bool:
    return _HEADER.search(text) is not None


FORMATS = [Format("nvtop screen", detect_nvtop, parse_nvtop)]

# No probe: nvtop is interactive; its screen is for pasted text.
PROBES: list[Probe] = []
