"""PyTorch's and vLLM's collect_env reports, PyTorch's "not compatible" and capability GPU
warnings, the GPU line of PyTorch's old bug-report template, filled in by hand, and the reports
beside them: Paddle's summary_env and detectron2's collect_env.

Paddle's tools/summary_env.py prints "Nvidia driver version: 440.33.01" (from nvidia-smi) and
"Nvidia driver List:" with `nvidia-smi -L` below it, cut before " (UUID:"; its "CUDA version" is
nvcc's. detectron2's collect_env prints a two-column table (tabulate), a row per GPU model with
its devices; later versions add torch's compute capability, and then the driver:

    GPU available           True
    GPU 0,1                 NVIDIA A100-PCIE-40GB (arch=8.0)
    Driver version          515.65.01
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from checks import versions
from checks.facts.gpus import is_nvidia, lookup
from checks.facts.model import Gpu, HostFacts, PythonPackage, Toolkit
from checks.facts.parsers import Format
from checks.facts.probe import Probe

# "Key: value" (PyTorch, older vLLM) and "Key           : value" (vLLM since 2025). The value runs
# to the end of the line and _fields strips it: a lazy value before "[ \t\r]*$" is quadratic.
_FIELD = re.compile(
    r"^(?P<key>PyTorch version|CUDA used to build PyTorch|OS|Libc version|Python platform"
    r"|CUDA runtime version|GPU models and configuration|Nvidia driver version|vLLM Version"
    r"|Is CUDA available|Nvidia driver List) *:[ \t]*(?P<value>[^\n]*)$",
    re.MULTILINE,
)
_GPU_LINE = re.compile(r"GPU (\d{1,4}): (.+)")  # on a stripped line
# The keys that list "GPU 0: NAME" lines: PyTorch's, and Paddle's over `nvidia-smi -L`.
_GPU_LIST_KEYS = {"GPU models and configuration", "Nvidia driver List"}
# Keys only collect_env prints, next to its GPU and driver keys: a paste cut past the report's
# head ("Collecting environment information...", "PyTorch version") still shows them
# (vllm-project/vllm#30435 starts at "CUDA_MODULE_LOADING set to   :").
_OWN_KEY = re.compile(
    r"^(?:CUDA_MODULE_LOADING set to|cuDNN version|HIP runtime version|MIOpen runtime version"
    r"|Is XNNPACK available|Is debug build) *:",
    re.MULTILINE,
)
_ARCHS = re.compile(r"^[^\S\n]*CUDA Archs: ([^;\n]*)", re.MULTILINE)
_LINE_BREAK = re.compile("\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")  # str.splitlines' breaks
# PyTorch's "NAME with CUDA capability sm_120 is not compatible with the current PyTorch
# installation.", also as people retype it: indented, in lower case, "capabilities"
# (HaoKang-Timmy/LatencySensitiveBench#19), wrapped after "the" (sp-uhh/sgmse#17). The name must
# be an NVIDIA GPU's; a page's address ("...-with-cuda-capability-sm-86-...") never matches.
_INCOMPATIBLE = re.compile(
    r"^[ \t]{0,8}(?P<name>\S.*?) with CUDA capabilit(?:y|ies) sm_(?P<sm>\d+) is not compatible"
    r" with the\b",
    re.MULTILINE | re.IGNORECASE,
)
# The warning's last sentence (torch/cuda/__init__.py), which a paste may keep alone: "If you want
# to use the NVIDIA GeForce RTX 5070 Ti GPU with PyTorch, please check the instructions at ...".
_WANT_TO_USE = re.compile(
    r"^If you want to use the (?P<name>\S[^\n]{0,120}?) GPU with PyTorch, please check the"
    r" instructions at https://pytorch\.org/",
    re.MULTILINE,
)
_SUPPORTS = re.compile(r"The current PyTorch install supports CUDA capabilities ((?:sm_\d+\w* ?)+)")
# Older PyTorch: "Found GPU0 Tesla K40m which is of cuda capability 3.5."
# (Read as a head, then the first tail after it on the line: one pattern with a lazy name between
# them rescans the line from every head.)
_TOO_OLD_HEAD = re.compile(r"Found GPU(?P<index>\d{1,4}) ")
_TOO_OLD_TAIL = re.compile(r" which is of cuda capability (?P<cc>\d+\.\d+)")
# What torch/cuda/__init__.py says next, on the next line or (re-logged) the same one: the range
# this build supports (pytorch/pytorch#172629), or that the GPU is too old (pytorch/pytorch#16712).
_TOO_OLD_NEXT = re.compile(
    r"\.\s{1,40}(?:Minimum and Maximum cuda capability supported by this version of PyTorch is"
    r"|PyTorch no longer supports this GPU because it is too old\.)"
)
_TORCH_PATH = re.compile(r"^(/\S+/(?:site|dist)-packages)/torch/", re.MULTILINE)
_UNKNOWN = ("", "Could not collect", "N/A", "No CUDA", "None", "Not Set")
# PyTorch's old bug-report template, copied by many projects, as people fill it in:
# " - GPU models and configuration: GeForce RTX 2070, driver 450.102.04" (pytorch/pytorch#51840).
# Only a catalogued GeForce, Quadro, Tesla or TITAN name, or one after "NVIDIA" ("NVIDIA 940MX",
# pytorch/pytorch#6098), before the first comma is read as the GPU, and "driver X.Y[.Z]" after it
# as the driver: what else people write there stays unread.
_TEMPLATE_GPU = re.compile(
    r"^[ \t]{0,4}[-*][ \t]{1,4}GPU models and configuration:[ \t]*([^,\n]*)(,[^\n]*)?$", re.M
)
_TEMPLATE_NAME = re.compile(r"NVIDIA [\w -]{1,40}|(?:GeForce|Quadro|Tesla|TITAN) [\w -]{1,40}")
_TEMPLATE_DRIVER = re.compile(r"(?:^|[\s,])driver:? (\d{3}\.\d{1,3}(?:\.\d{1,3})?)(?![\d.])")


def parse_collect_env(text: str) -> HostFacts:
    """`python -m torch.utils.collect_env` or vLLM's collect_env, with any warnings before it."""
    facts = HostFacts()
    fields: dict[str, str] = {}
    for key, found, end in _fields(text):
        fields.setdefault(key, found)
        if key in _GPU_LIST_KEYS and not facts.gpus:
            facts.gpus = _gpus(found, text, end)
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


def _fields(text: str) -> Iterator[tuple[str, str, int]]:
    """(key, value, end of line) of each known "Key: value" line."""
    for match in _FIELD.finditer(text):
        yield match.group("key"), match.group("value").rstrip(" \t\r"), match.end()


def _lines_after(text: str, pos: int) -> Iterator[str]:
    """The lines of `text[pos:]` after the first, as str.splitlines() cuts them, one at a time."""
    first = True
    while pos < len(text):
        brk = _LINE_BREAK.search(text, pos)
        end = brk.start() if brk is not None else len(text)
        if not first:
            yield text[pos:end]
        first = False
        pos = brk.end() if brk is not None else len(text)


def _gpus(first: str, text: str, end: int) -> list[Gpu]:
    """ "GPU 0: NAME" on the key's line, or one a line below it up to a blank line."""
    gpus: list[Gpu] = []
    lines = iter([first]) if first else _lines_after(text, end)
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
    found: list[tuple[str, str | None, int | None]] = [
        (name, _capability(m.group("sm")), None)
        for m in _INCOMPATIBLE.finditer(text)
        if (name := _warned_name(m.group("name"))) and is_nvidia(name)
    ]
    found += _too_old(text)
    named = {name for name, _, _ in found}
    models = {lookup(name) for name in named} - {None}
    wanted = [m.group("name") for m in _WANT_TO_USE.finditer(text)]
    found += [
        (name, None, None)
        for name in dict.fromkeys(wanted)
        if name not in named and lookup(name) not in models  # the same GPU's next sentence
    ]
    for name, capability, index in found:
        same = [g for g in facts.gpus if _same(g, name, index)]
        for gpu in same:
            gpu.compute_capability = capability or gpu.compute_capability
        if not same:
            facts.gpus.append(Gpu(index=index, name=name, compute_capability=capability))


def _warned_name(name: str) -> str | None:
    """The GPU's name in a warning's line, past what a paste puts before it: a warning's class
    ("UserWarning: "), an issue title's tag ("[Bug]: ", "Bug Report:"), a log's or a compose
    service's prefix ("app-1  | "). PyTorch's names hold no ':', '|' or ']'; a name left that
    does not start with a letter (a timestamp's tail) is no name."""
    cut = max(name.rfind(":"), name.rfind("|"), name.rfind("]"))
    name = name[cut + 1 :].strip()
    return name if name[:1].isalpha() else None


def _same(gpu: Gpu, name: str, index: int | None) -> bool:
    """Whether a warning is about `gpu`: by its index where the warning gives one (GPU0, GPU1
    and GPU2 may share a name), else by its name."""
    if index is None:
        return gpu.name == name
    return gpu.index == index or (gpu.index is None and gpu.name == name)


def _too_old(text: str) -> list[tuple[str, str, int | None]]:
    """(name, capability, index) of each "Found GPU0 NAME which is of cuda capability 3.5"."""
    return [found for found, _ in _found_gpus(text)]


def _found_gpus(text: str) -> Iterator[tuple[tuple[str, str, int | None], int]]:
    """Each "Found GPU0 NAME which is of cuda capability 3.5" as (name, capability, index), with
    where its capability ends."""
    pos = 0
    while (head := _TOO_OLD_HEAD.search(text, pos)) is not None:
        eol = text.find("\n", head.end())
        eol = len(text) if eol == -1 else eol
        tail = _TOO_OLD_TAIL.search(text, head.end() + 1, eol)
        if tail is None:
            pos = eol  # a later head on this line has less of the line to find a tail in
            continue
        name = text[head.end() : tail.start()]
        yield (name, tail.group("cc"), int(head.group("index"))), tail.end()
        pos = tail.end()


def _capability_warning(text: str) -> bool:
    """Whether PyTorch's capability warning is there as torch words it, for an NVIDIA GPU:
    "Found GPU0 NAME which is of cuda capability 12.1." and its next sentence. (An old ROCm
    build printed it for a Radeon, with a made-up capability.)"""
    return any(
        _TOO_OLD_NEXT.match(text, end) and is_nvidia(name)
        for (name, _, _), end in _found_gpus(text)
    )


def _capability(sm: str) -> str:
    """sm_120 -> "12.0", sm_86 -> "8.6"."""
    return f"{sm[:-1]}.{sm[-1]}" if len(sm) >= 2 else sm


def parse_template_gpu(text: str) -> HostFacts:
    """The GPU and driver of the first template line that names a catalogued GPU."""
    facts = HostFacts()
    for match in _TEMPLATE_GPU.finditer(text):
        name = match.group(1).strip()
        if _TEMPLATE_NAME.fullmatch(name) is None or lookup(name) is None:
            continue
        facts.gpus = [Gpu(name=name)]
        driver = _TEMPLATE_DRIVER.search(match.group(2) or "")
        facts.driver.version = driver.group(1) if driver else None
        break
    return facts


_CHUNK_KEYS = {"GPU models and configuration", "Nvidia driver version"}
_PADDLE_KEYS = {"Nvidia driver version", "Nvidia driver List"}


def detect_collect_env(text: str) -> bool:
    """The report with its head, or a chunk of it: its GPU and driver keys beside a key only it
    prints; or PyTorch's GPU warnings."""
    keys = {key for key, _, _ in _fields(text)}
    return (
        ("PyTorch version" in keys and len(keys) >= 3)
        or (keys >= _CHUNK_KEYS and _OWN_KEY.search(text) is not None)
        or keys >= _PADDLE_KEYS
        or _INCOMPATIBLE.search(text) is not None
        or _WANT_TO_USE.search(text) is not None
        or _capability_warning(text)
    )


# detectron2's table: rows of a name, two spaces or more, and the value.
_D2_AVAILABLE = re.compile(r"^(?:GPU|CUDA) available[ \t]{2,60}(?:True|Yes)[ \t]*$", re.MULTILINE)
_D2_GPUS = re.compile(r"^GPU (\d{1,3}(?:,\d{1,3}){0,63})[ \t]{2,60}(\S[^\n]{0,160})$", re.MULTILINE)
_D2_ARCH = re.compile(r" \(arch=(\d{1,2}\.\d{1,2})\)$")
_D2_DRIVER = re.compile(
    r"^Driver version[ \t]{2,60}(\d{3}\.\d{1,3}(?:\.\d{1,3})?)[ \t]*$", re.MULTILINE
)


def parse_detectron2_env(text: str) -> HostFacts:
    """detectron2's collect_env table: each GPU row's devices with their name and capability, and
    the driver where the table has one; a GPU row of another vendor's name is not read."""
    facts = HostFacts()
    if _D2_AVAILABLE.search(text) is None:
        return facts
    for row in _D2_GPUS.finditer(text):
        value = row.group(2).rstrip(" \t\r")
        arch = _D2_ARCH.search(value)
        name = value[: arch.start()] if arch else value
        if not is_nvidia(name):
            continue
        facts.gpus += [
            Gpu(index=int(index), name=name, compute_capability=arch.group(1) if arch else None)
            for index in row.group(1).split(",")
        ]
    driver = _D2_DRIVER.search(text)
    facts.driver.version = driver.group(1) if driver and facts.gpus else None
    return facts


def detect_detectron2_env(text: str) -> bool:
    return bool(parse_detectron2_env(text).gpus)


def detect_template_gpu(text: str) -> bool:
    return not detect_collect_env(text) and bool(parse_template_gpu(text).gpus)


FORMATS = [
    Format("collect-env", detect_collect_env, parse_collect_env),
    Format("bug-report template GPU line", detect_template_gpu, parse_template_gpu),
    Format("detectron2 collect_env", detect_detectron2_env, parse_detectron2_env),
]

# No probe: collect_env imports torch; the python-stack probe reads the same packages' metadata.
PROBES: list[Probe] = []
