"""`ubuntu-drivers devices` (or `list --verbose`): the NVIDIA GPUs it offers drivers for.

Each device is a block under its sysfs path (canonical/ubuntu-drivers-common#48):

    == /sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0 ==
    modalias : pci:v000010DEd000011C6sv00003842sd00003059bc03sc00i00
    vendor   : NVIDIA Corporation
    model    : GK106 [GeForce GTX 650 Ti]
    driver   : nvidia-driver-450-server - distro non-free recommended

The modalias gives the vendor, the device id and the class (bc03: a display controller); "model"
is the device's pci.ids name, missing when pci.ids does not know the id yet
(NVIDIA/open-gpu-kernel-modules#872). The "driver" lines are candidate packages, not the
installed driver, so no driver version is read.
"""

from __future__ import annotations

import re

from checks.facts.model import Gpu, HostFacts
from checks.facts.parsers import Format
from checks.facts.probe import Probe

_HEADER = re.compile(
    r"^== /sys/devices/\S{0,200}?/((?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])"
    r" ==[ \t]*$",
    re.MULTILINE,
)
_MODALIAS = re.compile(
    r"^modalias[ \t]{0,8}:[ \t]{0,4}pci:v000010DEd0000([0-9A-Fa-f]{4})sv[0-9A-Fa-f]{8}"
    r"sd[0-9A-Fa-f]{8}bc03sc[0-9A-Fa-f]{2}i[0-9A-Fa-f]{2}[ \t]*$",
    re.MULTILINE,
)
_MODEL = re.compile(r"^model[ \t]{0,8}:[ \t]{0,4}([^\n]{1,200})$", re.MULTILINE)


def _gpu(block: str, bus_id: str) -> Gpu | None:
    """The GPU of one device block, or None for another vendor's or class's device."""
    modalias = _MODALIAS.search(block)
    if modalias is None:
        return None
    model = _MODEL.search(block)
    name = model.group(1).strip() if model else None
    if name and (name.count("[") != name.count("]") or name.endswith(("...", "…"))):
        name = None
    return Gpu(name=name or None, pci_bus_id=bus_id.lower(),
               pci_device_id=f"10de:{modalias.group(1).lower()}")  # fmt: skip


def parse_ubuntu_drivers(text: str) -> HostFacts:
    """One Gpu per NVIDIA display device block."""
    facts = HostFacts()
    headers = list(_HEADER.finditer(text))
    for i, header in enumerate(headers):
        end = headers[i + 1].start() if i + 1 < len(headers) else len(text)
        blank = text.find("\n\n", header.end(), end)  # a block ends at a blank line
        gpu = _gpu(text[header.end() : end if blank < 0 else blank], header.group(1))
        if gpu is not None:
            facts.gpus.append(gpu)
    return facts


def detect_ubuntu_drivers(text: str) -> bool:
    return _HEADER.search(text) is not None and _MODALIAS.search(text) is not None


FORMATS = [Format("ubuntu-drivers devices", detect_ubuntu_drivers, parse_ubuntu_drivers)]

# No probe: nvidia-smi and NVML name the GPUs; ubuntu-drivers is for pasted output.
PROBES: list[Probe] = []
