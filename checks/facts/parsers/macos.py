"""macOS's view of the GPUs: `system_profiler SPDisplaysDataType` and the one-line summaries.

`system_profiler SPDisplaysDataType` (and System Information's window, copied with tabs) prints a
block per GPU, the vendor with its PCI id below the name (servo/pathfinder#3,
acidanthera/bugtracker#1231):

      Chipset Model: NVIDIA GeForce GT 750M
      Type: GPU
      Bus: PCIe
      VRAM (Total): 2048 MB
      Vendor: NVIDIA (0x10de)
      Device ID: 0x0fe9

A block counts when its Vendor line says NVIDIA; "NVIDIA Chip Model" is macOS's placeholder for a
GPU it cannot name, so that GPU is kept by its device id alone.

A crash report's system profile names each GPU on a "Graphics:" line, chipset first
("Graphics: NVIDIA GeForce GT 330M, NVIDIA GeForce GT 330M, PCIe, 256 MB", atg/chocolat-public
#1631), and people copy About This Mac's summary as "Graphics: NVIDIA GeForce GT 750M 2048MB
(PCIe)" (CESNET/GPUJPEG#4): the name, then its memory in MB. Either line counts when the name is an
NVIDIA GPU's and the line holds no alternative or requirement ("... or AMD ...", a game's
"Minimum:" list).
"""

from __future__ import annotations

import re

from checks.facts import gpus
from checks.facts.model import Gpu, HostFacts
from checks.facts.parsers import Format
from checks.facts.probe import Probe

_CHIPSET = re.compile(r"[ \t]*Chipset Model:[ \t]+(\S[^\n]{0,100}?)[ \t]*")
_VENDOR = re.compile(r"[ \t]*Vendor:[ \t]+(\S+)")
_DEVICE_ID = re.compile(r"[ \t]*Device ID:[ \t]+0x([0-9a-fA-F]{4})[ \t]*")
_VRAM = re.compile(r"[ \t]*VRAM \(Total\):[ \t]+(\d{1,6})[ \t]?(MB|GB)[ \t]*")
_PLACEHOLDER = "NVIDIA Chip Model"
BLOCK_LINES = 40  # a block's fields come within this many lines of its Chipset Model line

# "Graphics: NAME, NAME, BUS, N MB" (crash report) or "Graphics: NAME N MB [(BUS)]" (summary).
_GRAPHICS = re.compile(
    rf"^Graphics:[ \t]+({gpus.NAME_START}\b[^,\n]{{1,80}}?)"
    r"(?:,[ \t][^,\n]{1,80},[ \t](?:PCIe|PCI|Built-In),[ \t]\d{2,5}[ \t]?[MG]B"
    r"|[ \t]\d{2,5}[ \t]?MB(?:[ \t]\((?:PCIe|PCI|Built-In)\))?)[ \t]*$",
    re.MULTILINE,
)
_ALTERNATIVE = re.compile(
    r"\b(?:or|better|minimum|recommended|required|equivalent)\b|/", re.IGNORECASE
)
_REQUIREMENTS = re.compile(r"^(?:Minimum|Recommended|DirectX)\b[^\n]{0,30}:", re.MULTILINE)


def _blocks(text: str) -> list[Gpu]:
    """One Gpu per NVIDIA block of system_profiler's Graphics/Displays list."""
    found: list[Gpu] = []
    name: str | None = None
    vendor: str | None = None
    device: str | None = None
    memory: int | None = None
    left = 0
    for line in [*text.split("\n"), "Chipset Model: end"]:
        chipset = _CHIPSET.fullmatch(line)
        if chipset is not None or left == 0:
            if name is not None and vendor == "NVIDIA":
                named = None if name == _PLACEHOLDER else name
                if named is not None or device is not None:
                    found.append(Gpu(name=named, pci_device_id=device, memory_total_mib=memory))
            name, vendor, device, memory = (chipset.group(1) if chipset else None), None, None, None
            left = BLOCK_LINES if chipset else 0
            continue
        left -= 1
        if (match := _VENDOR.match(line)) is not None:
            vendor = match.group(1)
        elif (match := _DEVICE_ID.fullmatch(line)) is not None:
            device = f"10de:{match.group(1).lower()}"
        elif (match := _VRAM.fullmatch(line)) is not None:
            memory = int(match.group(1)) * (1024 if match.group(2) == "GB" else 1)
    return found


def _summary(text: str) -> list[Gpu]:
    """One Gpu per NVIDIA "Graphics:" line, unless the text lists a game's requirements."""
    if _REQUIREMENTS.search(text) is not None:
        return []
    found = []
    for match in _GRAPHICS.finditer(text):
        name = match.group(1).strip()
        if _ALTERNATIVE.search(match.group(0)) or name == _PLACEHOLDER or not gpus.is_nvidia(name):
            continue
        found.append(Gpu(name=name))
    return found


def parse_macos(text: str) -> HostFacts:
    """The NVIDIA GPUs system_profiler lists, or else those of "Graphics:" summary lines."""
    return HostFacts(gpus=_blocks(text) or _summary(text))


def detect_macos(text: str) -> bool:
    return ("Chipset Model:" in text or "Graphics:" in text) and bool(parse_macos(text).gpus)


FORMATS = [Format("macOS system_profiler / Graphics line", detect_macos, parse_macos)]

# No probe: gpuprov probes Linux hosts; these are read from pastes.
PROBES: list[Probe] = []
