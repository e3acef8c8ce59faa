"""PyTorch's and vLLM's collect_env reports, and PyTorch's "not compatible" GPU warnings."""

from __future__ import annotations

import re

from checks import versions
from checks.facts.model import Gpu, HostFacts, PythonPackage, Toolkit
from checks.facts.parsers import Format
from checks.facts.probe import Probe

# "Key: value" (PyTorch, older vLLM) and "Key           : value" (vLLM since 2025).
_FIELD = re.compile(
    r"^(?P<key>PyTorch version|CUDA used to build PyTorch|OS|Libc version|Python platform"
    r"|CUDA runtime version|GPU models and configuration|Nvidia driver version|vLLM Version"
    r"|Is CUDA available) *:[ \t]*(?P<value>[^\n]*?)[ \t\r]*$",
    re.MULTILINE,
)
_GPU_LINE = re.compile(r"^GPU (\d{1,4}): (.+?)\s*$")
_ARCHS = re.compile(r"^\s*CUDA Archs: ([^;\n]*)", re.MULTILINE)
_INCOMPATIBLE = re.compile(
    r"^(?P<name>\S.*?) with CUDA capability sm_(?P<sm>\d+) is not compatible with the current"
    r" PyTorch installation",
    re.MULTILINE,
)
_SUPPORTS = re.compile(r"The current PyTorch install supports CUDA capabilities ((?:sm_\d+\w* ?)+)")
# Older PyTorch: "Found GPU0 Tesla K40m which is of cuda capability 3.5."
_TOO_OLD = re.compile(
    r"Found GPU(?P<index>\d{1,4}) (?P<name>.+?) which is of cuda capability (?P<cc>\d+\.\d+)"
)
_TORCH_PATH = re.compile(r"^(/\S+/(?:site|dist)-packages)/torch/", re.MULTILINE)
_UNKNOWN = ("", "Could not collect", "N/A", "No CUDA", "None", "Not Set")


def parse_collect_env(text: str) -> HostFacts:
    """`python -m torch.utils.collect_env` or vLLM's collect_env, with any warnings before it."""
    facts = HostFacts()
    fields: dict[str, str] = {}
    for match in _FIELD.finditer(text):
        fields.setdefault(match.group("key"), match.group("value"))
        if match.group("key") == "GPU models and configuration" and not facts.gpus:
            facts.gpus = _gpus(match.group("value"), text[match.end() :])
    value = {key: raw for key, raw in fields.items() if raw not in _UNKNOWN}
    _system(facts, value)
    facts.driver.version = value.get("Nvidia driver version")
    runtime = value.get("CUDA runtime version")
    if runtime is not None and versions.cuda(runtime) is not None:
        facts.toolkits.append(Toolkit(version=runtime, release=str(versions.release(runtime))))
    torch = _torch(text, value)
    if torch is not None:
        facts.python.append(torch)
    if "vLLM Version" in value:
        vllm = PythonPackage(name="vllm", version=value["vLLM Version"])
        archs = _ARCHS.search(text)
        if archs is not None and archs.group(1).strip() not in _UNKNOWN:
            vllm.cuda_archs = archs.group(1).split()
        facts.python.append(vllm)
    _incompatible(facts, text)
    return facts


def _gpus(first: str, rest: str) -> list[Gpu]:
    """ "GPU 0: NAME" on the key's line, or one a line below it up to a blank line."""
    gpus: list[Gpu] = []
    lines = [first] if first else rest.splitlines()[1:]
    for line in lines:
        match = _GPU_LINE.match(line.strip())
        if match is None:
            break
        gpus.append(Gpu(index=int(match.group(1)), name=match.group(2)))
    return gpus


def _system(facts: HostFacts, value: dict[str, str]) -> None:
    system = facts.system
    if "OS" in value:
        pretty = re.match(r"^(.*?)(?: \((x86_64|aarch64|arm64|ppc64le|s390x)\))?$", value["OS"])
        system.os_pretty = pretty.group(1) if pretty else value["OS"]
        system.machine = pretty.group(2) if pretty else None
    libc = re.match(r"^glibc-(\d+\.\d+)", value.get("Libc version", ""))
    system.glibc = libc.group(1) if libc else None
    platform = re.match(r"^Linux-(.+?)(?:-with-.*)?$", value.get("Python platform", ""))
    if platform is not None and "-" in platform.group(1):
        system.kernel_release, system.machine = platform.group(1).rsplit("-", 1)


def _torch(text: str, value: dict[str, str]) -> PythonPackage | None:
    version = value.get("PyTorch version")
    supports = _SUPPORTS.search(text)
    if version is None and supports is None:
        return None
    torch = PythonPackage(name="torch", version=version)
    built = value.get("CUDA used to build PyTorch")
    cuda = versions.release(built) if built else versions.torch_cuda(version)
    torch.cuda_version = str(cuda) if cuda is not None else None
    if supports is not None:
        torch.cuda_archs = supports.group(1).split()
    location = _TORCH_PATH.search(text)
    torch.location = location.group(1) if location else None
    return torch


def _incompatible(facts: HostFacts, text: str) -> None:
    """GPUs PyTorch named as unsupported carry their compute capability."""
    found: list[tuple[str, str, int | None]] = [
        (m.group("name"), _capability(m.group("sm")), None) for m in _INCOMPATIBLE.finditer(text)
    ]
    found += [
        (m.group("name"), m.group("cc"), int(m.group("index"))) for m in _TOO_OLD.finditer(text)
    ]
    for name, capability, index in found:
        same = [g for g in facts.gpus if g.name == name or (index is not None and g.index == index)]
        for gpu in same:
            gpu.compute_capability = capability
        if not same:
            facts.gpus.append(Gpu(index=index, name=name, compute_capability=capability))


def _capability(sm: str) -> str:
    """sm_120 -> "12.0", sm_86 -> "8.6"."""
    return f"{sm[:-1]}.{sm[-1]}" if len(sm) >= 2 else sm


def detect_collect_env(text: str) -> bool:
    keys = {m.group("key") for m in _FIELD.finditer(text)}
    return ("PyTorch version" in keys and len(keys) >= 3) or _INCOMPATIBLE.search(text) is not None


FORMATS = [Format("collect-env", detect_collect_env, parse_collect_env)]

# No probe: collect_env imports torch; the python-stack probe reads the same packages' metadata.
PROBES: list[Probe] = []
