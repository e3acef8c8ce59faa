"""clinfo's long form, and device listings of other OpenCL programs: the GPUs, the driver and its
CUDA version under NVIDIA's OpenCL platform.

NVIDIA's OpenCL library ships with the driver (it is the driver's ICD, not the toolkit's), and its
platform version names the CUDA version of that driver: driver 470.63.01 reports "OpenCL 3.0
CUDA 11.4.112" (Oblomov/clinfo#75). Each device under the platform gives its name and the driver
version (mbevand/silentarmy#63; on Windows too, hashcat/hashcat#3551):

      Platform Name                                   NVIDIA CUDA
      Platform Version                                OpenCL 1.2 CUDA 8.0.46
    Number of devices                                 1
      Device Name                                     Quadro K1100M
      Driver Version                                  367.57

Devices of other platforms (Intel, AMD, POCL) are not read, nor the "NULL platform behavior"
section at the end, which names the default device again.
"""

from __future__ import annotations

import re

from checks.facts.model import Gpu, HostFacts
from checks.facts.parsers import Format
from checks.facts.probe import Probe

_KEY = re.compile(
    r"[ \t]{0,8}(Platform Name|Platform Version|Device Name|Driver Version)[ \t]{2,60}"
)
_CUDA = re.compile(r"OpenCL \d{1,2}\.\d{1,2} CUDA (\d{1,2}\.\d{1,2})(?:\.\d{1,5})?[ \t]*$")
_DRIVER = re.compile(r"(\d{2,4}\.\d{1,3}(?:\.\d{1,3})?)[ \t]*$")
_END = ("NULL platform behavior", "ICD loader properties")
_NVIDIA = "NVIDIA CUDA"


def _entries(text: str) -> list[tuple[str, str, str]]:
    """(platform, key, value) for each key line, before the NULL-platform section."""
    entries = []
    platform = ""
    for line in text.split("\n"):
        if line.strip().startswith(_END):
            break
        key = _KEY.match(line)
        if key is None:
            continue
        value = line[key.end() :].strip()
        if key.group(1) == "Platform Name":
            platform = value
        entries.append((platform, key.group(1), value))
    return entries


def parse_clinfo(text: str) -> HostFacts:
    """The devices, driver and CUDA version of NVIDIA's OpenCL platform."""
    facts = HostFacts()
    for platform, key, value in _entries(text):
        if platform != _NVIDIA:
            continue
        if key == "Platform Version" and (cuda := _CUDA.match(value)):
            facts.driver.cuda_version = facts.driver.cuda_version or cuda.group(1)
        elif key == "Driver Version" and (driver := _DRIVER.fullmatch(value)):
            facts.driver.version = facts.driver.version or driver.group(1)
        elif key == "Device Name" and value:
            facts.gpus.append(Gpu(name=value))
    return facts


def detect_clinfo(text: str) -> bool:
    return any(p == _NVIDIA and k == "Device Name" for p, k, _ in _entries(text))


# A device listing an OpenCL program prints in "key: value" lines (the GPGPU course's enumDevices,
# GPGPUCourse/GPGPUTasks2023#56), its labels the author's own:
#     Number of OpenCL platforms: 1
#     Platform #1/1
#         Platform name: NVIDIA CUDA
#         Number of devices: 1
#             Device name: NVIDIA GeForce GTX 1650
#             Device driver version: 525.125.06
# Only the NVIDIA CUDA platform is read: from its "Platform name" to the next platform.
_LISTING = "Number of OpenCL platforms:"
_LABEL = re.compile(r"[ \t]{0,16}([A-Za-z][A-Za-z ]{0,40}?)[ \t]{0,4}:[ \t]{0,16}")
_NAME_KEYS = ("name", "device name")
_DRIVER_KEYS = ("driver version", "device driver version")
_COUNT_KEYS = ("number of devices", "device count")
_NEXT_PLATFORM = re.compile(r"[ \t]{0,16}Platform #?\d{1,3}\b")
_DEVICE_OF = re.compile(r"[ \t]{0,16}(?:-- )?Device #\d{1,2}/(\d{1,2})\b")
_COUNT = re.compile(r"\d{1,2}")
MAX_DEVICES = 16


def _listing(text: str) -> list[tuple[str, str]]:
    """(key, value) of each line of the NVIDIA CUDA platform, keys lower-cased."""
    entries: list[tuple[str, str]] = []
    nvidia = False
    for line in text.split("\n"):
        if _NEXT_PLATFORM.match(line):
            nvidia = False
            continue
        numbered = _DEVICE_OF.match(line)
        if numbered is not None and nvidia:  # "Device #2/4": the platform has 4
            entries.append(("device count", numbered.group(1)))
            continue
        label = _LABEL.match(line)
        if label is None:
            continue
        key, value = " ".join(label.group(1).lower().split()), line[label.end() :].strip()
        if key == "platform name":
            nvidia = value == _NVIDIA
        elif nvidia:
            entries.append((key, value))
    return entries


def parse_opencl_listing(text: str) -> HostFacts:
    """The devices and driver version an OpenCL listing shows under NVIDIA's platform."""
    facts = HostFacts()
    count = 0
    for key, value in _listing(text):
        if key in _NAME_KEYS and value:
            facts.gpus.append(Gpu(name=value))
        elif key in _DRIVER_KEYS and (driver := _DRIVER.fullmatch(value)):
            facts.driver.version = facts.driver.version or driver.group(1)
        elif key in _COUNT_KEYS and _COUNT.fullmatch(value):
            count = max(count, int(value))
    if len(facts.gpus) < count <= MAX_DEVICES:  # a listing cut before its last devices
        facts.gpus.extend(Gpu() for _ in range(count - len(facts.gpus)))
    return facts


def detect_opencl_listing(text: str) -> bool:
    return _LISTING in text and not detect_clinfo(text) and bool(_listing(text))


FORMATS = [
    Format("clinfo", detect_clinfo, parse_clinfo),
    Format("OpenCL device listing", detect_opencl_listing, parse_opencl_listing),
]

# No probe: nvidia-smi reports the driver on a host; clinfo is for pasted output.
PROBES: list[Probe] = []
