"""inxi's Graphics section (`inxi -G`, `-Gx`, `-Fxz`): the NVIDIA GPUs and the nvidia module.

inxi 3 names each display device on a "Device-N:" item, as lspci names it with the vendor's short
name first, and its fields as "key: value" pairs, on one line (inxi 3.0, smxi/inxi#191):

    Graphics:  Device-1: NVIDIA GP104 [GeForce GTX 1080] vendor: ASUSTeK driver: nvidia v: 430.40

or wrapped onto more deeply indented lines (inxi 3.3, smxi/sgfxi#67):

      Device-2: NVIDIA TU116M [GeForce GTX 1660 Ti Mobile] vendor: Lenovo
        driver: nvidia v: 515.43.04 alternate: nouveau,nvidia_drm
        ... bus-ID: 01:00.0
        chip-ID: 10de:2191 class-ID: 0300

The name is kept in lspci's form ("GP104 [GeForce GTX 1080]"); "driver: nvidia v: N" is the
version of the kernel driver bound to the device. Devices of other sections (the GPU's HDMI audio
function is an NVIDIA "Device-2:" under "Audio:") are not GPUs.
"""

from __future__ import annotations

import re

from checks.facts.model import Gpu, HostFacts
from checks.facts.parsers import Format
from checks.facts.probe import Probe

# A section head starts a line ("Audio:", "Graphics:  Device-1: ..."); the Graphics head may end a
# line of prose that quotes the report ('First line of the INXI report shows: "Graphics:').
_HEAD = re.compile(r"([A-Z][A-Za-z]{1,15}):(?:[ \t]|$)")
_GRAPHICS_END = re.compile(r"\bGraphics:[ \t]*$")
_DEVICE = re.compile(r"^([ \t\"']*(?:Graphics:[ \t]+)?)(?:Device|Card)(?:-\d{1,2})?:[ \t]+(.*)$")
# Where the name ends: the first field key.
_KEY = re.compile(
    r"[ \t](?:vendor|driver|v|bus[- ]ID|chip-ID|class-ID|arch|ports|pcie|alternate|non-free)"
    r":(?:[ \t]|$)"
)
_DRIVER = re.compile(r"(?:^|[ \t])driver: nvidia v: (\d{3}\.\d{1,3}(?:\.\d{1,3})?)(?![\d.])")
_BUS = re.compile(
    r"(?:^|[ \t])bus[- ]ID: ((?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\b"
)
_CHIP = re.compile(r"(?:^|[ \t])chip-ID: 10de:([0-9a-fA-F]{4})\b")
_UNKNOWN = re.compile(r"Device ([0-9a-fA-F]{4})")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t\"'"))


def _records(text: str) -> list[tuple[str, str]]:
    """(first line, every line) of each Graphics device item: its line and the more deeply
    indented ones below it."""
    records: list[tuple[str, list[str]]] = []
    graphics = False
    current: list[str] | None = None
    depth = 0
    for line in text.split("\n"):
        device = _DEVICE.match(line)
        if current is not None and device is None and line.strip() and _indent(line) > depth:
            current.append(line.strip())
            continue
        current = None
        head = _HEAD.match(line)
        if head is not None:
            graphics = head.group(1) == "Graphics"
        if device is not None and graphics:
            depth = len(device.group(1))
            current = [device.group(2).strip()]
            records.append((current[0], current))
        if _GRAPHICS_END.search(line) is not None:
            graphics = True
    return [(first, " ".join(lines)) for first, lines in records]


def _name(first: str) -> tuple[str | None, bool]:
    """(name, is NVIDIA) of a device item's first line; the name in lspci's form."""
    if not first.startswith("NVIDIA "):
        return None, False
    rest = first[len("NVIDIA ") :]
    key = _KEY.search(" " + rest)
    name = (rest[: key.start()] if key else rest).strip().rstrip("\"'").strip()
    if not name or _UNKNOWN.fullmatch(name):
        return None, True
    partial = name.count("[") != name.count("]") or name.endswith(("...", "…"))
    return None if partial else name, True


def parse_inxi(text: str) -> HostFacts:
    """One Gpu per NVIDIA Graphics device, and the nvidia driver's version."""
    facts = HostFacts()
    for first, record in _records(text):
        name, nvidia = _name(first)
        if not nvidia:
            continue
        bus = _BUS.search(record)
        chip = _CHIP.search(record)
        unknown = _UNKNOWN.search(first)
        device_id = (
            chip.group(1) if chip else unknown.group(1) if unknown and name is None else None
        )
        facts.gpus.append(
            Gpu(
                name=name,
                pci_bus_id=bus.group(1).lower() if bus else None,
                pci_device_id=f"10de:{device_id.lower()}" if device_id else None,
            )
        )
        driver = _DRIVER.search(record)
        if driver is not None and facts.driver.kernel_module_version is None:
            facts.driver.kernel_module_version = driver.group(1)
    return facts


def detect_inxi(text: str) -> bool:
    return any(_name(first)[1] for first, _ in _records(text))


FORMATS = [Format("inxi -G", detect_inxi, parse_inxi)]

# No probe: nvidia-smi and NVML name the GPUs and the driver; inxi is for pasted output.
PROBES: list[Probe] = []
