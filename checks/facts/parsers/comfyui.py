"""ComfyUI's start-up lines and its error report's "System Information": the CUDA devices.

ComfyUI (comfy/model_management.py) names its default device as "<device> <torch name> :
<allocator>", at start-up after "Total VRAM 24564 MB, total RAM 32694 MB" and "pytorch version:
2.7.0+cu128":

    Device: cuda:0 NVIDIA GeForce RTX 4090 : native

and per device in the report it writes for an error (Comfy-Org/ComfyUI#11186):

    - **PyTorch Version:** 2.8.0+cu129
    ## Devices
    - **Name:** cuda:0 NVIDIA GeForce RTX 5090 : cudaMallocAsync
      - **VRAM Total:** 34190458880

Only NVIDIA names count: ROCm builds and ZLUDA also call their device "cuda:0" ("cuda:0 AMD
Radeon RX 6800 [ZLUDA] : native"). The memory is what PyTorch sees (MB and bytes, in MiB), the
wheel's CUDA comes from its local version; no driver version is printed.
"""

from __future__ import annotations

import re

from checks import versions
from checks.facts import gpus
from checks.facts.model import Gpu, HostFacts, PythonPackage
from checks.facts.parsers import Format
from checks.facts.probe import Probe

# A line may carry ComfyUI's log-file timestamp ("2025-12-08T20:52:51.019405 - ").
_STAMP = r"(?:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,6})? - )?"
_DEVICE = re.compile(
    rf"^{_STAMP}(?:Device:|[ \t]{{0,4}}- \*\*Name:\*\*)[ \t]cuda:(\d{{1,2}})[ \t]"
    rf"({gpus.NAME_START}\b[^\n:]{{0,120}}?)[ \t]:[ \t]?([A-Za-z]{{0,40}})[ \t]*$",
    re.MULTILINE,
)
_TOTAL_MB = re.compile(rf"^{_STAMP}Total VRAM (\d{{1,7}}) MB, total RAM \d{{1,9}} MB[ \t]*$", re.M)
_TOTAL_BYTES = re.compile(r"^[ \t]{1,8}- \*\*VRAM Total:\*\* (\d{1,15})[ \t]*$", re.MULTILINE)
_TORCH = re.compile(
    rf"^(?:{_STAMP}pytorch version: |- \*\*PyTorch Version:\*\* )(\d{{1,3}}\.\d{{1,3}}\S{{0,40}})"
    r"[ \t]*$",
    re.MULTILINE,
)
MIB = 1024 * 1024


def _gpus(text: str) -> list[Gpu]:
    """One Gpu per device line; the memory from the report's VRAM Total below it, or else from
    the start-up's Total VRAM when there is one device."""
    found = list(_DEVICE.finditer(text))
    gpus = []
    for i, device in enumerate(found):
        end = found[i + 1].start() if i + 1 < len(found) else len(text)
        total = _TOTAL_BYTES.search(text, device.end(), end)
        name = device.group(2).strip()
        cut = name.endswith(("...", "…")) or name.count("[") != name.count("]")
        memory = round(int(total.group(1)) / MIB) if total else None
        gpus.append(Gpu(index=int(device.group(1)), name=None if cut else name,
                        memory_total_mib=memory))  # fmt: skip
    megabytes = _TOTAL_MB.findall(text)
    if len(gpus) == 1 and len(megabytes) == 1 and gpus[0].memory_total_mib is None:
        gpus[0].memory_total_mib = int(megabytes[0])
    return gpus


def parse_comfyui(text: str) -> HostFacts:
    """The NVIDIA CUDA devices ComfyUI names, and the PyTorch it runs on."""
    facts = HostFacts()
    facts.gpus = _gpus(text)
    if not facts.gpus:
        return facts
    torch = _TORCH.search(text)
    if torch is not None:
        cuda = versions.torch_cuda(torch.group(1))
        facts.python.append(PythonPackage(name="torch", version=torch.group(1),
                                          cuda_version=str(cuda) if cuda else None))  # fmt: skip
    return facts


def detect_comfyui(text: str) -> bool:
    return _DEVICE.search(text) is not None


FORMATS = [Format("ComfyUI start-up / system information", detect_comfyui, parse_comfyui)]

# No probe: ComfyUI prints these when it starts or reports an error.
PROBES: list[Probe] = []
