"""SGLang's `python3 -m sglang.check_env`: GPUs and capabilities, the driver, torch and sglang.

GPUs of one model are grouped on one line ("GPU 0,1,2,3: NVIDIA B200"), their capability on the
next ("GPU 0,1,2,3 Compute Capability: 10.0"). "CUDA Driver Version" is the driver's own version
(580.95.05), not the CUDA it supports; the NVCC line is read by the nvcc parser.
"""

from __future__ import annotations

import re

from checks import versions
from checks.facts.model import Gpu, HostFacts, PythonPackage
from checks.facts.parsers import Format
from checks.facts.probe import Probe

_INDEXES = r"(\d{1,4}(?:,\d{1,4}){0,1023})"
_NAMES = re.compile(rf"^GPU {_INDEXES}: ([^\n]+)$", re.MULTILINE)
_CAPABILITY = re.compile(rf"^GPU {_INDEXES} Compute Capability: (\d+\.\d+)[ \t]*$", re.MULTILINE)
_DRIVER = re.compile(r"^CUDA Driver Version: (\d{3}\.\d{1,3}(?:\.\d{1,3})?)[ \t]*$", re.MULTILINE)
_PACKAGE = re.compile(r"^(PyTorch|sglang): (\S+)[ \t]*$", re.MULTILINE)
_MARKERS = re.compile(r"^(?:CUDA available|CUDA_HOME): ", re.MULTILINE)


def parse_check_env(text: str) -> HostFacts:
    """`sglang.check_env`: one Gpu per index, the driver version, the torch and sglang versions."""
    facts = HostFacts()
    gpus: dict[int, Gpu] = {}
    for indexes, name in _NAMES.findall(text):
        for index in map(int, indexes.split(",")):
            gpus.setdefault(index, Gpu(index=index, name=name.strip() or None))
    for indexes, capability in _CAPABILITY.findall(text):
        for index in map(int, indexes.split(",")):
            gpu = gpus.setdefault(index, Gpu(index=index))
            gpu.compute_capability = gpu.compute_capability or capability
    facts.gpus = [gpus[index] for index in sorted(gpus)]
    driver = _DRIVER.search(text)
    facts.driver.version = driver.group(1) if driver else None
    seen: set[str] = set()
    for name, version in _PACKAGE.findall(text):
        if name in seen or version == "Module":  # "vllm: Module Not Found"
            continue
        seen.add(name)
        package = PythonPackage(name="torch" if name == "PyTorch" else name, version=version)
        if package.name == "torch":
            cuda = versions.torch_cuda(version)
            package.cuda_version = str(cuda) if cuda is not None else None
        facts.python.append(package)
    return facts


def detect_check_env(text: str) -> bool:
    """Its "CUDA available: " and "CUDA_HOME: " lines with a capability or driver line; a paste
    cut after the GPU names has the first marker and the names line only."""
    markers = {m.group(0) for m in _MARKERS.finditer(text)}
    if len(markers) == 2 and (_CAPABILITY.search(text) or _DRIVER.search(text)):
        return True
    return "CUDA available: " in markers and any(
        "(UUID: " not in name for _, name in _NAMES.findall(text)
    )


FORMATS = [Format("sglang.check_env", detect_check_env, parse_check_env)]

# No probe: check_env imports torch and sglang; the python-stack probe reads their metadata.
PROBES: list[Probe] = []
