"""clinfo's long form: the GPUs, the driver and its CUDA version under NVIDIA's OpenCL platform.

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


FORMATS = [Format("clinfo", detect_clinfo, parse_clinfo)]

# No probe: nvidia-smi reports the driver on a host; clinfo is for pasted output.
PROBES: list[Probe] = []
