"""nouveau's kernel log: the chip of each GPU nouveau drives.

When nouveau binds a GPU it logs the chip by its codename, after the device's PCI address
(negativo17/nvidia-driver#73, NVIDIA/open-gpu-kernel-modules#1151), or, before Linux 4.3, on a
"Chipset:" line (Bumblebee-Project/Bumblebee#684, #626):

    nouveau 0000:01:00.0: NVIDIA GM204 (124020a1)
    nouveau  [  DEVICE][0000:01:00.0] Chipset: GM204 (NV124)

A chip is no board (GM204 is the GeForce GTX 970 and 980 and several Quadros), so the GPU is
named by its chip, "NVIDIA GM204", and its compute capability, which every board of one chip
shares, comes from the chip: the list below, from NVIDIA's CUDA GPUs table and the chips of the
boards there in pci.ids. An unlisted chip keeps its name and no capability. The names are read
as a fallback: a tool that names the board (lspci, nvidia-smi) wins.
"""

from __future__ import annotations

import re

from checks.facts.model import Gpu, HostFacts
from checks.facts.parsers import Format
from checks.facts.probe import Probe

_BUS = r"(?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]"
_CHIP = r"[A-Z]{1,3}\d{2,3}[A-Z]?"
_BOUND = re.compile(
    rf"\bnouveau ({_BUS}): NVIDIA ({_CHIP}) \([0-9a-f]{{8}}\)[ \t]*$"
    rf"|\bnouveau[ \t]{{1,4}}\[[ \t]{{0,8}}DEVICE\]\[({_BUS})\] Chipset: ({_CHIP})"
    r" \(NV[0-9A-F]{2,3}\)[ \t]*$",
    re.MULTILINE,
)

# (architecture, compute capability) of each chip with a CUDA capability.
_CHIPS = {
    **dict.fromkeys(("G80",), ("Tesla", "1.0")),
    **dict.fromkeys(("G84", "G86", "G92", "G94", "G96", "G98"), ("Tesla", "1.1")),
    **dict.fromkeys(("GT215", "GT216", "GT218"), ("Tesla", "1.2")),
    **dict.fromkeys(("GT200",), ("Tesla", "1.3")),
    **dict.fromkeys(("GF100", "GF110"), ("Fermi", "2.0")),
    **dict.fromkeys(
        ("GF104", "GF106", "GF108", "GF114", "GF116", "GF117", "GF119"), ("Fermi", "2.1")
    ),
    **dict.fromkeys(("GK104", "GK106", "GK107"), ("Kepler", "3.0")),
    **dict.fromkeys(("GK20A",), ("Kepler", "3.2")),
    **dict.fromkeys(("GK110", "GK110B", "GK208", "GK208B"), ("Kepler", "3.5")),
    **dict.fromkeys(("GK210",), ("Kepler", "3.7")),
    **dict.fromkeys(("GM107", "GM108"), ("Maxwell", "5.0")),
    **dict.fromkeys(("GM200", "GM204", "GM206"), ("Maxwell", "5.2")),
    **dict.fromkeys(("GM20B",), ("Maxwell", "5.3")),
    **dict.fromkeys(("GP100",), ("Pascal", "6.0")),
    **dict.fromkeys(("GP102", "GP104", "GP106", "GP107", "GP108"), ("Pascal", "6.1")),
    **dict.fromkeys(("GP10B",), ("Pascal", "6.2")),
    **dict.fromkeys(("GV100",), ("Volta", "7.0")),
    **dict.fromkeys(("TU102", "TU104", "TU106", "TU116", "TU117"), ("Turing", "7.5")),
    **dict.fromkeys(("GA100",), ("Ampere", "8.0")),
    **dict.fromkeys(("GA102", "GA103", "GA104", "GA106", "GA107"), ("Ampere", "8.6")),
    **dict.fromkeys(("AD102", "AD103", "AD104", "AD106", "AD107"), ("Ada", "8.9")),
    **dict.fromkeys(("GH100",), ("Hopper", "9.0")),
    **dict.fromkeys(("GB202", "GB203", "GB205", "GB206", "GB207"), ("Blackwell", "12.0")),
}


def _gpu(bus: str, chip: str) -> Gpu:
    architecture, capability = _CHIPS.get(chip, (None, None))
    return Gpu(
        name=f"NVIDIA {chip}",
        pci_bus_id=bus,
        compute_capability=capability,
        architecture=architecture,
    )


def parse_nouveau(text: str) -> HostFacts:
    """One Gpu per PCI device nouveau names a chip for, named by its chip."""
    facts = HostFacts()
    seen: set[str] = set()
    for match in _BOUND.finditer(text):
        bus = match.group(1) or match.group(3)
        chip = match.group(2) or match.group(4)
        if bus.lower() not in seen:
            seen.add(bus.lower())
            facts.gpus.append(_gpu(bus.lower(), chip))
    return facts


def detect_nouveau(text: str) -> bool:
    return _BOUND.search(text) is not None


FORMATS = [Format("nouveau kernel log", detect_nouveau, parse_nouveau, fallback=True)]

# No probe: the nvidia module's own output names the GPUs it drives; nouveau's log is pasted.
PROBES: list[Probe] = []
