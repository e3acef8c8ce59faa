"""Ollama's server log: the GPUs it found, their capability, and the driver behind them.

Its "inference compute" line names each GPU (`name=`, or `description=` since name became
"CUDA0"), its `compute=` capability and the CUDA the driver supports (`driver=12.3`); the GPU is
`id=GPU-<uuid>`, or in newer releases a bare `id=1` beside its `pci_id=` (ollama/ollama#17766).
With OLLAMA_DEBUG the path of the libcuda it loads carries the driver's version
(libcuda.so.570.86.16), and early 2024 releases printed NVML's driver version and device names
and the NVML library they load (libnvidia-ml.so.545.29.06).
Its "NVIDIA driver too old" warning (discover/cuda_compat.go) names the
GPU as `device=` and the driver's branch as `driver=535` (ollama/ollama#16415). A journald or
syslog prefix is taken off before (see capture.clean); an "inference compute" line pasted without
its prefix at all still counts (ollama/ollama#13338).
"""

from __future__ import annotations

import re

from checks.facts.model import Gpu, HostFacts
from checks.facts.parsers import Format
from checks.facts.probe import Probe

_PAIR = re.compile(r'(?<![\w.])([\w.]{1,40})=("[^"\n]{0,1024}"|[^\s"]+)')  # a bounded quote
_MSG = re.compile(r'\bsource=[\w.]+:\d+ msg="?')
# "initializing /usr/lib/x86_64-linux-gnu/libcuda.so.570.86.16" (gpu.go, debug) and
# library=/usr/lib/.../libcuda.so.545.23.08 in "detected GPUs"; a compat libcuda is not the driver.
_LIBCUDA = re.compile(
    r"(?:^initializing |\blibrary=)([^\s=]*/libcuda\.so\.(\d{3}\.\d{1,3}(?:\.\d{1,3})?))(?![\w.])"
)
# OLLAMA_DEBUG's discovery lines: gpu_info_nvcuda.c's "CUDA driver version: 12.3" is the CUDA
# the driver supports; early 2024's gpu_info_nvml.c printed the driver's own version there
# ("CUDA driver version: 546.01", nvmlSystemGetDriverVersion) and "[0] CUDA device name: NAME".
# OLLAMA_DEBUG, early 2024: "wiring nvidia management library functions in
# /nix/store/...-nvidia-x11-545.29.06/lib/libnvidia-ml.so.545.29.06": the NVML library it loads
# (abysssol/ollama-flake#4). Read only where every library it loads has the same version.
_LIBNVML = re.compile(
    r"^wiring nvidia management library functions in [^\s=]*/libnvidia-ml\.so\."
    r"(\d{3}\.\d{1,3}(?:\.\d{1,3})?)[ \t]*$",
    re.MULTILINE,
)
_DRIVER_CUDA = re.compile(r"^CUDA driver version: (\d{1,2}\.\d{1,2})[ \t]*$", re.MULTILINE)
_NVML_DRIVER = re.compile(
    r"^CUDA driver version: (\d{3}\.\d{1,3}(?:\.\d{1,3})?)[ \t]*$", re.MULTILINE
)
_NVML_NAME = re.compile(r"^\[(\d{1,3})\] CUDA device name: ([^\n]*\S)[ \t]*$", re.MULTILINE)
_UUID_CAPABILITY = re.compile(r"^\[(GPU-[0-9a-fA-F-]{8,})\] Compute Capability (\d+\.\d+)[ \t]*$")
_GPU_MSGS = ('msg="inference compute"', 'msg="updating cuda memory data"')
# The same line pasted without its "time=... level=INFO source=... msg=" prefix
# (ollama/ollama#13338): read only for a GPU it names by a whole UUID or a PCI address, so a
# line typed as an example ("id=GPU-xxxx") stays unread.
_BARE = "inference compute id="
_BARE_LINE = re.compile(r"^[ \t]*inference compute id=", re.MULTILINE)
_UUID = re.compile(r"GPU-[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}")
_TOO_OLD = 'msg="NVIDIA driver too old"'
_BRANCH = re.compile(r"\d{3}(?:\.\d{1,3}){0,2}")
_CC = re.compile(r"\d{1,2}\.\d")
_BUS = re.compile(r"[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-9a-fA-F]")


def _pairs(line: str) -> dict[str, str]:
    return {key: value.strip('"') for key, value in _PAIR.findall(line)}


def parse_ollama(text: str) -> HostFacts:
    """Ollama's log: GPUs by their UUID, the driver's CUDA, the driver from libcuda's path."""
    facts = HostFacts()
    gpus: dict[str, Gpu] = {}
    for line in text.split("\n"):
        line = line.strip()
        capability = _UUID_CAPABILITY.match(line)
        if capability is not None:
            known = gpus.setdefault(capability.group(1), Gpu(uuid=capability.group(1)))
            known.compute_capability = known.compute_capability or capability.group(2)
            continue
        library = _LIBCUDA.search(line)
        if library is not None and "compat" not in library.group(1):
            facts.driver.version = facts.driver.version or library.group(2)
        if _TOO_OLD in line:
            _too_old(facts, gpus, _pairs(line))
            continue
        bare = line.startswith(_BARE)
        if not bare and not any(msg in line for msg in _GPU_MSGS):
            continue
        pairs = _pairs(line)
        if bare and not _named_gpu(pairs):
            continue
        if pairs.get("library", "cuda").lower() != "cuda":
            continue
        gpu = _gpu(gpus, pairs)
        if gpu is None:
            continue
        name = pairs.get("description") or pairs.get("name")
        if name and not re.fullmatch(r"CUDA\d+", name):
            gpu.name = gpu.name or name
        compute = pairs.get("compute", "")
        if _CC.fullmatch(compute) and compute != "0.0":
            gpu.compute_capability = gpu.compute_capability or compute
        driver = pairs.get("driver", "")
        if re.fullmatch(r"\d{1,2}\.\d{1,2}", driver):
            facts.driver.cuda_version = facts.driver.cuda_version or driver
    cuda = _DRIVER_CUDA.search(text)
    if cuda is not None:
        facts.driver.cuda_version = facts.driver.cuda_version or cuda.group(1)
    nvml = _NVML_DRIVER.search(text)
    if nvml is not None:
        facts.driver.version = facts.driver.version or nvml.group(1)
    nvml_libraries = set(_LIBNVML.findall(text))
    if len(nvml_libraries) == 1:
        facts.driver.nvml_library_version = nvml_libraries.pop()
    for index, name in _NVML_NAME.findall(text):
        if not any(g.name == name for g in gpus.values()):
            gpus.setdefault(f"nvml {index}", Gpu(index=int(index), name=name))
    facts.gpus = list(gpus.values())
    return facts


def _gpu(gpus: dict[str, Gpu], pairs: dict[str, str]) -> Gpu | None:
    """The GPU a line is about: by its UUID, or by the PCI address newer releases print beside a
    bare index; None when the line names neither."""
    uuid = pairs.get("id") or pairs.get("gpu") or ""
    if uuid.startswith("GPU-"):
        return gpus.setdefault(uuid, Gpu(uuid=uuid))
    bus = pairs.get("pci_id", "")
    if uuid.isdigit() and _BUS.fullmatch(bus):
        return gpus.setdefault(bus, Gpu(index=int(uuid), pci_bus_id=bus))
    return None


def _line_at(text: str, pos: int) -> str:
    """The rest of the line from `pos`."""
    end = text.find("\n", pos)
    return text[pos : end if end >= 0 else len(text)]


def _named_gpu(pairs: dict[str, str]) -> bool:
    """Whether a line names its GPU by a whole UUID, or by an index beside a PCI address."""
    gpu = pairs.get("id", "")
    return bool(_UUID.fullmatch(gpu) or (gpu.isdigit() and _BUS.fullmatch(pairs.get("pci_id", ""))))


def _too_old(facts: HostFacts, gpus: dict[str, Gpu], pairs: dict[str, str]) -> None:
    """The "NVIDIA driver too old" warning: the GPU (unless already named) and the driver."""
    name, driver = pairs.get("device", ""), pairs.get("driver", "")
    if name.startswith("NVIDIA") and not any(g.name == name for g in gpus.values()):
        gpu = gpus.setdefault(f"too old: {name}", Gpu(name=name))
        compute = pairs.get("compute", "")
        gpu.compute_capability = compute if _CC.fullmatch(compute) else None
    if _BRANCH.fullmatch(driver):
        facts.driver.version = facts.driver.version or driver


def detect_ollama(text: str) -> bool:
    return (
        (
            _MSG.search(text) is not None
            and (
                any(msg in text for msg in _GPU_MSGS)
                or "libcuda.so." in text
                or _LIBNVML.search(text) is not None
            )
        )
        or _TOO_OLD in text
        or any(_named_gpu(_pairs(_line_at(text, m.start()))) for m in _BARE_LINE.finditer(text))
        or (_NVML_DRIVER.search(text) is not None and _NVML_NAME.search(text) is not None)
    )


FORMATS = [Format("ollama log", detect_ollama, parse_ollama)]

# No probe: the log is the server's, read from a paste.
PROBES: list[Probe] = []
