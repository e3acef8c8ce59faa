"""Paddle's note on the GPU it runs on: the device's compute capability and the driver's CUDA.

Paddle logs it once, when it first uses a GPU (paddle/phi/backends/gpu/gpu_resources.cc, formerly
platform/device_context.cc), as a glog warning:

    W0120 19:29:14.875797 20703 device_context.cc:447] Please NOTE: device: 0, GPU Compute
    Capability: 8.6, Driver API Version: 11.4, Runtime API Version: 10.2

(one line). Releases before 2.0 wrote "CUDA Capability: 75". "Driver API Version" is
cudaDriverGetVersion, the CUDA the driver supports; "Runtime API Version" is the CUDA runtime
Paddle loaded, a toolkit's. A ROCm build prints HIP's versions in the same words: a line is read
only when its driver version is a CUDA release (7.0 to 19.x).
"""

from __future__ import annotations

import re

from checks.facts.model import Gpu, HostFacts
from checks.facts.parsers import Format
from checks.facts.probe import Probe

_NOTE = re.compile(
    r"\bdevice: (\d{1,2}), (?:GPU Compute Capability: (\d{1,2}\.\d)|CUDA Capability: (\d{2,3}))"
    r", Driver (?:API )?Version: (\d{1,2})\.(\d), Runtime (?:API )?Version: \d{1,2}\.\d\b"
)
_CUDA_MAJORS = range(7, 20)


def parse_device_note(text: str) -> HostFacts:
    """One Gpu per device a note names, with its capability; the driver's CUDA from the first."""
    facts = HostFacts()
    for note in _NOTE.finditer(text):
        index, capability, old, major, minor = note.groups()
        if int(major) not in _CUDA_MAJORS:
            continue
        if capability is None:  # "CUDA Capability: 75" is major * 10 + minor
            capability = f"{old[:-1]}.{old[-1]}"
        facts.gpus.append(Gpu(index=int(index), compute_capability=capability))
        facts.driver.cuda_version = facts.driver.cuda_version or f"{major}.{minor}"
    return facts


def detect_device_note(text: str) -> bool:
    return bool(parse_device_note(text).gpus)


FORMATS = [Format("Paddle device note", detect_device_note, parse_device_note)]

# No probe: Paddle prints it when it runs on a GPU.
PROBES: list[Probe] = []
