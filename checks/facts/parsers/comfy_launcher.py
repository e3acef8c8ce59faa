"""The ComfyUI Launcher's (aki) diagnostic file: the driver from NVML, the CUDA driver's version
and its devices.

The launcher writes a section per GPU library it queried (ShmuelRonen/ComfyUI-LatentSyncWrapper
#128, siliconflow/BizyAir#187, Lightricks/ComfyUI-LTXVideo#269):

    NVIDIA Management Library:
      NVIDIA Driver Version: 572.60
      NVIDIA Management Library Version: 12.572.60

    CUDA Driver:
      Version: 12080
      Devices:
        00000000:01:00.0 0: NVIDIA GeForce RTX 4090 [89] 23 GB

    DirectML Driver:
      Devices:
        9860 0: NVIDIA GeForce RTX 4090 23 GB

The CUDA driver's version is cuDriverGetVersion's integer (12080 is 12.8), and each CUDA device
line gives the bus id, the index, the name and the compute capability in brackets ([89] is 8.9).
Only the CUDA section's devices count: the HIP section lists AMD GPUs, and DirectML lists the same
cards again (some twice) beside integrated ones.
"""

from __future__ import annotations

import re

from checks.facts.model import Gpu, HostFacts
from checks.facts.parsers import Format
from checks.facts.probe import Probe

_HEADER = re.compile(r"([A-Z][A-Za-z0-9 ]{1,40}):[ \t]*")
_DRIVER = re.compile(r"[ \t]{1,8}NVIDIA Driver Version: (\d{3}\.\d{2,3}(?:\.\d{2,3})?)[ \t]*")
_VERSION = re.compile(r"[ \t]{1,8}Version: (\d{4,6})[ \t]*")
_DEVICE = re.compile(
    r"[ \t]{1,12}([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]) (\d{1,2}): "
    r"([^\[\]\n]{1,120}?) \[(\d{2,3})\] \d{1,4} GB[ \t]*"
)
_OWN_SECTIONS = {"NVIDIA Management Library", "CUDA Driver"}


def _sections(text: str) -> list[tuple[str, str]]:
    """(section, line) of each indented line, under the last header at the margin above it."""
    found = []
    section = ""
    for line in text.split("\n"):
        header = _HEADER.fullmatch(line)
        if header is not None:
            section = header.group(1)
        elif line[:1] in (" ", "\t"):
            found.append((section, line))
    return found


def _cuda(value: str) -> str | None:
    """cuDriverGetVersion's integer as major.minor: 12080 is "12.8"."""
    number = int(value)
    major, minor = number // 1000, number % 1000 // 10
    return f"{major}.{minor}" if 9 <= major <= 19 else None


def parse_comfy_launcher(text: str) -> HostFacts:
    """The driver, its CUDA version and the CUDA devices of a launcher diagnostic file."""
    facts = HostFacts()
    for section, line in _sections(text):
        driver = _DRIVER.fullmatch(line) if section == "NVIDIA Management Library" else None
        version = _VERSION.fullmatch(line) if section == "CUDA Driver" else None
        device = _DEVICE.fullmatch(line) if section == "CUDA Driver" else None
        if driver is not None:
            facts.driver.version = facts.driver.version or driver.group(1)
        elif version is not None:
            facts.driver.cuda_version = facts.driver.cuda_version or _cuda(version.group(1))
        elif device is not None:
            sm = device.group(4)
            facts.gpus.append(
                Gpu(
                    index=int(device.group(2)),
                    name=device.group(3).strip(),
                    pci_bus_id=device.group(1),
                    compute_capability=f"{sm[:-1]}.{sm[-1]}",
                )
            )
    return facts


def detect_comfy_launcher(text: str) -> bool:
    sections = {section for section, _ in _sections(text)}
    return sections >= _OWN_SECTIONS and parse_comfy_launcher(text) != HostFacts()


FORMATS = [Format("ComfyUI Launcher diagnostics", detect_comfy_launcher, parse_comfy_launcher)]

# No probe: the launcher writes the file on Windows, and people paste it.
PROBES: list[Probe] = []
