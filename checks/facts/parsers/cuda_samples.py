"""The CUDA samples: deviceQuery (Linux and Windows), and the device lines the other samples print.

deviceQuery gives the driver's CUDA and one Gpu per device. The other samples (nbody, matrixMul,
...) pick a device through helper_cuda.h's findCudaDevice, which prints its number and compute
capability with, in the samples of CUDA 11 and later, the architecture's name where older ones
put the GPU's (NVIDIA/cuda-samples#65; SthPhoenix/InsightFace-REST#58):

    GPU Device 0: "GeForce RTX 3090" with compute capability 8.6
    GPU Device 0: "Pascal" with compute capability 6.1

and nbody names each device it simulates on:

    > Compute 6.1 CUDA device: [NVIDIA GeForce GTX 1060]

An architecture's name ("Ampere", or "Hopper" for a GPU newer than the helper knows) is never a
GPU's; nbody's own line gives the name.
"""

from __future__ import annotations

import re

from checks.facts.model import Gpu, HostFacts
from checks.facts.parsers import Format
from checks.facts.probe import Probe

_BANNER = "CUDA Device Query (Runtime API)"
# The name in straight quotes, or in curly ones where a blog re-typed the output (with its own
# notes after the closing quote).
_DEVICE = re.compile(
    r'^Device (\d{1,4}): (?:"([^"\n]*)"|\u201c([^\u201c\u201d\n]*)\u201d)(?=[ \t]|$)',
    re.MULTILINE,
)
_VERSIONS = re.compile(
    r"^[ \t]*CUDA Driver Version / Runtime Version[ \t]+(\d+\.\d+)[ \t]*/[ \t]*\d+\.\d+",
    re.MULTILINE,
)
_CAPABILITY = re.compile(
    r"^[ \t]*CUDA Capability Major/Minor version number:[ \t]*(\d+\.\d+)", re.MULTILINE
)
_MEMORY = re.compile(r"^[ \t]*Total amount of global memory:[ \t]*(\d+) MBytes", re.MULTILINE)
_PCI = re.compile(
    r"^[ \t]*Device PCI Domain ID / Bus ID / location ID:[ \t]*(\d{1,5}) / (\d{1,3}) / (\d{1,3})",
    re.MULTILINE,
)
# The summary line at the end: "deviceQuery, CUDA Driver = CUDART, CUDA Driver Version = 12.8, ..."
_SUMMARY = re.compile(r"deviceQuery, CUDA Driver = CUDART, CUDA Driver Version = (\d+\.\d+)")


def parse_device_query(text: str) -> HostFacts:
    """`deviceQuery`: the CUDA the driver supports, and each device's name, capability, memory.

    The device number is CUDA's, the index nvidia-smi uses unless CUDA_DEVICE_ORDER or
    CUDA_VISIBLE_DEVICES reorders them; deviceQuery prints the PCI bus in decimal.
    """
    facts = HostFacts()
    devices = list(_DEVICE.finditer(text))
    for i, device in enumerate(devices):
        end = devices[i + 1].start() if i + 1 < len(devices) else len(text)
        block = text[device.end() : end]
        name = device.group(2) if device.group(2) is not None else device.group(3)
        gpu = Gpu(index=int(device.group(1)), name=name.strip() or None)
        capability = _CAPABILITY.search(block)
        gpu.compute_capability = capability.group(1) if capability else None
        memory = _MEMORY.search(block)
        gpu.memory_total_mib = int(memory.group(1)) if memory else None
        pci = _PCI.search(block)
        if pci is not None:
            domain, bus, slot = (int(part) for part in pci.groups())
            gpu.pci_bus_id = f"{domain:08X}:{bus:02X}:{slot:02X}.0"
        facts.gpus.append(gpu)
        versions = _VERSIONS.search(block)
        if versions is not None:
            facts.driver.cuda_version = facts.driver.cuda_version or versions.group(1)
    summary = _SUMMARY.search(text)
    if summary is not None:
        facts.driver.cuda_version = facts.driver.cuda_version or summary.group(1)
    return facts


_FOUND = re.compile(
    r"(?<![\w-])GPU Device (\d{1,2}): \"([^\"\n]{1,100})\" with compute capability (\d{1,2}\.\d)\b"
)
_NBODY = re.compile(r"(?<![\w-])Compute (\d{1,2}\.\d) CUDA device: \[([^\[\]\n]{1,100})\]")
# What helper_cuda.h's _ConvertSMVer2ArchName prints in place of a name, and its fallback.
_ARCH_NAMES = {"Kepler", "Maxwell", "Pascal", "Volta", "Xavier", "Turing", "Ampere", "Ada"}
_ARCH_NAMES |= {"Hopper", "Blackwell", "Fermi", "Tesla", "Graphics Device"}


def _nbody_devices(text: str) -> list[Gpu]:
    """The devices of nbody's first run of "Compute X.Y CUDA device: [NAME]" lines."""
    found: list[Gpu] = []
    last = -2
    for number, line in enumerate(text.split("\n")):
        match = _NBODY.search(line)
        if match is None:
            continue
        if found and number != last + 1:
            break
        last = number
        name = match.group(2).strip()
        found.append(Gpu(name=name or None, compute_capability=match.group(1)))
    return found


def parse_sample_devices(text: str) -> HostFacts:
    """The devices the samples' findCudaDevice and nbody name: index, compute capability, name."""
    facts = HostFacts()
    chosen: dict[int, Gpu] = {}  # by device number, the first line of each
    for match in _FOUND.finditer(text):
        name = match.group(2).strip()
        named = None if name in _ARCH_NAMES else name or None
        index = int(match.group(1))
        chosen.setdefault(index, Gpu(index=index, name=named, compute_capability=match.group(3)))
    simulated = _nbody_devices(text)
    if len(chosen) == 1 and len(simulated) == 1:
        index, gpu = next(iter(chosen.items()))
        if gpu.compute_capability == simulated[0].compute_capability:
            simulated[0].index = index
    facts.gpus = simulated or [chosen[index] for index in sorted(chosen)]
    return facts


def detect_sample_devices(text: str) -> bool:
    return ("GPU Device" in text or "CUDA device: [" in text) and bool(
        parse_sample_devices(text).gpus
    )


def detect_device_query(text: str) -> bool:
    """The banner or the summary line, or (a paste cut above the banner) a `Device n: "NAME"`
    line with deviceQuery's own capability line after it."""
    if _BANNER in text or _SUMMARY.search(text) is not None:
        return True
    device = _DEVICE.search(text)
    return device is not None and _CAPABILITY.search(text, device.end()) is not None


FORMATS = [
    Format("deviceQuery", detect_device_query, parse_device_query),
    Format("CUDA samples' device lines", detect_sample_devices, parse_sample_devices),
]

# No probe: deviceQuery is built from the CUDA samples, not installed with the driver.
PROBES: list[Probe] = []
