"""`vulkaninfo` and `vulkaninfo --summary` (or their lines kept by grep): NVIDIA GPUs and driver.

Each device prints `deviceName = ...`, `vendorID = 0x10de`, `driverVersion = ...` and, from
Vulkan 1.2, `driverID`, `driverName` and `driverInfo` ("550.54.14" for NVIDIA's own driver).
vulkaninfo decodes NVIDIA's packed driverVersion as major.minor.patch.build
("470.161.3.192" for 470.161.03); older ones print the packed number ("1973960896 (0x75a80f00)").

Only NVIDIA's proprietary driver gives a driver version: a device run by Mesa (NVK, or Dozen on
WSL, "Microsoft Direct3D12 (NVIDIA ...)") reports Mesa's version, and a Jetson's integrated GPU
("NVIDIA Tegra Orin (nvgpu)") its L4T release, not a driver branch. Dozen's devices are skipped:
their name is Microsoft's.

The Ryujinx emulator logs the Vulkan device it renders on (PrintGpuInformation in
Ryujinx.Graphics.Vulkan/VulkanRenderer.cs) as the vendor, the device's name, and NVIDIA's packed
driver version decoded the same way:

    00:00:03.820 |N| GUI.RenderLoop Gpu PrintGpuInformation: NVIDIA NVIDIA GeForce GTX 1650
    (Vulkan v1.3.224, Driver v526.47.0.0)

(one line). Its vendor word is "NVIDIA" only for NVIDIA's PCI vendor id.
"""

from __future__ import annotations

import re

from checks.facts import gpus
from checks.facts.model import Gpu, HostFacts
from checks.facts.parsers import Format
from checks.facts.probe import Probe

_KEYS = "apiVersion|driverVersion|vendorID|deviceType|deviceName|driverID|driverName|driverInfo"
_FIELD = re.compile(rf"^[ \t]{{0,16}}({_KEYS})[ \t]{{0,40}}= ?([^\n]*)$", re.MULTILINE)
_GPU_HEADER = re.compile(r"^GPU(\d{1,3}):[ \t]*$", re.MULTILINE)
# A new device starts where one of these repeats; the driver properties repeat in the
# Vulkan 1.2 properties block of the same device.
_FIRST = ("apiVersion", "driverVersion", "vendorID", "deviceName")
_NVIDIA_NAME = re.compile(rf"{gpus.NAME_START}\b")
_DRIVER_INFO = re.compile(r"\d{3}\.\d{1,3}(?:\.\d{1,3})?")
_DECODED = re.compile(r"(\d{3,4})\.(\d{1,3})\.(\d{1,3})\.\d{1,3}(?: \(\d{1,10}\))?")
_PACKED = re.compile(r"(\d{1,10}) \(0x[0-9a-fA-F]{1,8}\)")


def _devices(text: str) -> list[dict[str, str]]:
    """The fields of each device, in order, split at GPUn: headers or at a repeated field."""
    marks = [(m.start(), "GPU", "") for m in _GPU_HEADER.finditer(text)]
    fields = [(m.start(), m.group(1), m.group(2).strip()) for m in _FIELD.finditer(text)]
    devices: list[dict[str, str]] = []
    current: dict[str, str] | None = None
    for _, key, value in sorted(marks + fields):
        if key == "GPU" or current is None or (key in _FIRST and key in current and not marks):
            current = {}
            devices.append(current)
        if key != "GPU":
            current.setdefault(key, value)
    return [device for device in devices if device.get("deviceName")]


def _nvidia_version(major: int, minor: int, patch: int) -> str:
    """NVIDIA's version from its parts: the second and third are two digits at least (566.03,
    470.161.03), the third absent when 0."""
    return f"{major}.{minor:02d}" if patch == 0 else f"{major}.{minor:02d}.{patch:02d}"


def _driver(device: dict[str, str]) -> str | None:
    """The NVIDIA driver version a device reports, or None (Mesa, a Jetson, unknown)."""
    info = device.get("driverInfo", "")
    if _DRIVER_INFO.fullmatch(info):
        return info
    if "MESA" in device.get("driverID", "").upper() or "Tegra" in device.get("deviceName", ""):
        return None
    if "INTEGRATED" in device.get("deviceType", ""):
        return None
    raw = device.get("driverVersion", "")
    decoded = _DECODED.fullmatch(raw)
    if decoded is not None:
        major, minor, patch = (int(part) for part in decoded.groups())
        return _nvidia_version(major, minor, patch) if major >= 100 else None
    packed = _PACKED.fullmatch(raw)
    if packed is not None and device.get("vendorID", "").lower() == "0x10de":
        value = int(packed.group(1))
        major, minor, patch = (value >> 22) & 0x3FF, (value >> 14) & 0xFF, (value >> 6) & 0xFF
        return _nvidia_version(major, minor, patch) if major >= 100 else None
    return None


def _is_nvidia(device: dict[str, str]) -> bool:
    name = device["deviceName"]
    if name.startswith("Microsoft Direct3D12"):
        return False
    vendor = device.get("vendorID")
    if vendor is not None:
        return vendor.lower() == "0x10de"
    return _NVIDIA_NAME.match(name) is not None


def parse_vulkaninfo(text: str) -> HostFacts:
    """One Gpu per NVIDIA device, and the driver version of the first that reports one."""
    facts = HostFacts()
    for device in _devices(text):
        if not _is_nvidia(device):
            continue
        name = device["deviceName"]
        cut = name.endswith(("...", "…")) or name.count("(") != name.count(")")
        facts.gpus.append(Gpu(name=None if cut else name))
        facts.driver.version = facts.driver.version or _driver(device)
    return facts


def detect_vulkaninfo(text: str) -> bool:
    return any(m.group(1) == "deviceName" for m in _FIELD.finditer(text))


_RYUJINX = re.compile(
    rf"\bPrintGpuInformation: NVIDIA ({gpus.NAME_START}\b[^\n()]{{0,120}})"
    r" \(Vulkan v\d{1,2}\.\d{1,3}\.\d{1,4}, Driver v(\d{3,4})\.(\d{1,3})\.(\d{1,3})\.\d{1,3}\)"
)


def parse_ryujinx(text: str) -> HostFacts:
    """The NVIDIA GPU and driver of Ryujinx's "PrintGpuInformation" lines."""
    facts = HostFacts()
    names: dict[str, None] = {}  # a line per start of the renderer: each GPU once
    for found in _RYUJINX.finditer(text):
        names.setdefault(found.group(1).strip())
        major, minor, patch = (int(part) for part in found.group(2, 3, 4))
        facts.driver.version = facts.driver.version or _nvidia_version(major, minor, patch)
    facts.gpus = [Gpu(name=name) for name in names]
    return facts


def detect_ryujinx(text: str) -> bool:
    return _RYUJINX.search(text) is not None


FORMATS = [
    Format("vulkaninfo", detect_vulkaninfo, parse_vulkaninfo),
    Format("Ryujinx GPU information", detect_ryujinx, parse_ryujinx),
]

# No probe: nvidia-smi and NVML report the driver; vulkaninfo is for pasted output.
PROBES: list[Probe] = []
