"""Hand-written environment lists: "GPU: NAME", "Driver: VERSION", "CUDA Version: X.Y" lines.

Issue templates ask for the environment and people answer with a list of their own, often in
markdown (vllm-project/vllm#15081, Syllo/nvtop#426, vllm-project/vllm#24383), or print NVML's
answers by hand (XuehaiPan/nvitop#208):

    GPU: NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition, 97,887 MiB
    PCI device/subsystem: 10de:2bb4, 1028:204c
    Driver: 580.173.02
    *   **Product Name**: NVIDIA RTX PRO 6000 Blackwell Server Edition
    NVIDIA Driver: 580.95.05
    device : NVIDIA GB10

Only known keys count, each with a strict value shape: a GPU is an NVIDIA name or one the GPU
catalogue knows ("L20", "rtx3090"), cut before a comma, a bracket, an aside in italics or its
memory, unless NVIDIA names the model with it ("RTX 3050 6GB", keylase/nvidia-patch#1009); a
capability in the bracket right after the name is the GPU's ("GPU: NVIDIA JMJWOA-Generic-GPU
(compute_cap 12.1, sm_121, ...)", NVIDIA/NemoClaw#4658) where the catalogue agrees or does not
know the model; a generic key ("Device", "Hardware") names no GPU where a key that says GPU in
the same list names one (NemoClaw#4658's "Device: DGX Spark (spark-8158, ...)" is the machine);
"2x NAME", "NAME x2" and "NAME (x2)" are two (keylase/nvidia-patch#1034); a bullet may touch its
key ("-GPU Model: ..."); a driver is NVIDIA's NNN.NN[.NN]; the CUDA version only under
nvidia-smi's own "CUDA Version" key (a bare "CUDA: 12.8" may be the toolkit's), in parentheses
right after the driver ("Driver: 595.79 (CUDA 13.2)", bitsandbytes-foundation/bitsandbytes#1937;
"(supports CUDA 13.0)", immich-app/immich#28031), also after a driver with its digits masked
("Driver: 53x.xx (supports CUDA 12.5)", abetlen/llama-cpp-python#2234, which names no driver), or
after a comma where the line credits nvidia-smi ("Driver: 592.27, CUDA 13.1 (per nvidia-smi)",
ollama/ollama#17222), and a bare CUDA key's version where nvcc's other version follows it ("CUDA:
13.1 / NVCC 13.2", ggml-org/llama.cpp#22499); a driver may be written as its package's name
("- **Driver**: nvidia-driver-580.105.08 (previously nvidia-driver-570-open)",
NVIDIA/open-gpu-kernel-modules#1001); a value that opens with a markdown link reads as the link's
text ("- Nvidia driver version: [581.94](URL)", keylase/nvidia-patch#1020), a bracket with no link
after it ("[e.g. 410.48]") stays; a PCI id only NVIDIA's 10de:XXXX. A list counts when it
states two of these facts, or when a lone GPU line ("GPU: RTX 5090", mudler/LocalAI#5189; "- GPU:
Tesla P40", unslothai/unsloth#813; gpustat's "- The name(s) of GPU card: Tesla V100-SXM2",
wookayin/gpustat#147) names GPUs the catalogue knows and no wording of a requirement ("or better",
"minimum"); any other lone line stays unread. nvidia-smi -q's padded "Product Name   : "
lines are its parser's. A bullet may separate its GPU or driver key from the value with " - "
instead of a colon, as Docker Desktop's issue form answers were typed ("  - GPU - GTX 1080",
"  - GPU Driver - 465.21", docker/for-win#10218).

GitHub issue forms render each field as a heading with the answer as its own paragraph
(invoke-ai/InvokeAI#6106, XuehaiPan/nvitop#93):

    ### GPU model

    RTX 2060

    ### NVIDIA driver version

     535.98

A GPU or driver heading counts alone when its answer, the next non-blank line, is a valid value:
a driver NNN.NN[.NN], a GPU the catalogue knows; "_No response_" is no answer. A bold label on a
line of its own ("**GPU**") is a heading too, and a "Hardware" heading counts when its answer
opens with an NVIDIA GPU's name (lmstudio-ai/lmstudio-bug-tracker#1051). open-gpu-kernel-modules'
"### Hardware: GPU" counts when its answer opens with a name the catalogue knows, typed by hand
("Nvidia pro 6000 blackwell max-q workstation", NVIDIA/open-gpu-kernel-modules#949).
llama.cpp's "### Hardware" answer joins the machine's parts with " + " ("Ryzen 5 2600 + MSI 1660
Ti Ventus 6GB OC", "Tesla P40 + 3090"): each part that opens with a GPU's name counts, and there a
GeForce number may stand alone ("3090", "2x 4090"); a part that lists GPUs between commas ("A100,
3090") lists machines and counts for nothing.
"""

from __future__ import annotations

import re

from checks.facts import gpus
from checks.facts.model import Gpu, HostFacts, merge
from checks.facts.parsers import Format, clinfo
from checks.facts.probe import Probe

_LINE = re.compile(
    r"^[ \t]{0,8}(?:[-*+][ \t]{1,4}|-(?=[A-Za-z])|\d{1,2}[.)][ \t]{1,4})?(?:\*\*)?"
    r"([A-Za-z][A-Za-z/-]{0,20}(?:\(s\))?(?: [A-Za-z/-]{1,20}(?:\(s\))?){0,4}"
    r"|\u8bbe\u5907\u540d\u79f0)"
    r"(?:\*\*)?[ \t]{0,2}(?::(?:\*\*)?[ \t]{1,8}|\uff1a(?:\*\*)?[ \t]{0,8})([^\n]{1,300})$",
    re.MULTILINE,
)
# A bullet whose key and value a " - " separates: "  - GPU Driver - 465.21". Read for GPU and
# driver keys only, on lines that hold no "key: value".
_DASH_LINE = re.compile(
    r"^[ \t]{0,8}[-*+][ \t]{1,4}(?:\*\*)?([A-Za-z]{1,20}(?: [A-Za-z]{1,20}){0,3})(?:\*\*)?"
    r" - ([^\n]{1,300})$",
    re.MULTILINE,
)
# Keys in other languages, as their English key: "设备名称" (device name) with a full-width colon,
# zzc0721/torch-performance-test-data's submission template.
_KEY_NAMES = {"\u8bbe\u5907\u540d\u79f0": "device name"}
_GPU_KEYS = {
    "gpu",
    "gpus",
    "gpu model",
    "gpu name",
    "graphics card",
    "hardware",
    "product name",
    "device",
    "video card",
    "the name(s) of gpu card",
}
# GPU keys that may name the machine rather than its GPU ("Device: DGX Spark (...)"): read only
# where no other GPU key of the list names a GPU.
_GENERIC_GPU_KEYS = {"device", "hardware"}
_DRIVER_KEYS = {
    "driver",
    "driver version",
    "nvidia driver",
    "nvidia driver version",
    "gpu driver",
    "gpu driver version",
    "display driver",
    "nv driver",
    "nv driver version",
}
# The driver's CUDA: nvidia-smi's key, and the CUDA driver's version under its own name ("CUDA
# DRIVER: 12.6", XuehaiPan/nvitop#168); a bare "CUDA: 12.8" may be the toolkit's.
_CUDA_KEYS = {"cuda version", "cuda driver", "cuda driver version"}
# GPU keys that may stand alone: ones that say GPU ("Device:" or "Hardware:" alone may be anything),
# and a benchmark's "Device Name" (never paired: its "CUDA Version" beside it may be torch's).
_LONE_GPU_KEYS = {
    "gpu",
    "gpus",
    "gpu model",
    "gpu name",
    "graphics card",
    "video card",
    "device name",
    "the name(s) of gpu card",
}
# An issue form's field: "### Label" (or a question, "### What GPU / hardware type are you
# using?"), blank lines, the answer on a line of its own.
_HEADING = re.compile(
    r"^#{2,4}[ \t]{1,4}([A-Za-z][A-Za-z /:-]{0,40}|[A-Za-z][A-Za-z /()'-]{0,80}\?)[ \t]*\n"
    r"(?:[ \t]{0,8}\n){1,2}[ \t]{0,8}([^\n]{1,300})$",
    re.MULTILINE,
)
# A form's question about the writer's own GPU, whose answer stands for a GPU key ("What GPU are
# you using?", LykosAI/StabilityMatrix's "What GPU / hardware type are you using?"); one about a
# driver, a wish or a plan ("Which GPU would you like supported?") is no such question.
_GPU_QUESTION = re.compile(
    r"(?:what|which)\b(?=.*\b(?:gpus?|graphics card|video card)\b)"
    r"(?=.*\b(?:you|your)\b)(?!.*\b(?:driver|would|like|want|should|plan|recommend|support"
    r"|buy|need)\w*\b).*\?",
)
# A bold label on a line of its own, the answer on the next one: "**Hardware**" over "NVIDIA
# GeForce RTX 3060, with proprietary drivers.".
_BOLD_HEADING = re.compile(
    r"^\*\*([A-Za-z][A-Za-z /-]{0,40})\*\*[ \t]{0,8}\n"
    r"(?:[ \t]{0,8}\n){0,2}[ \t]{0,8}([^\n]{1,300})$",
    re.MULTILINE,
)
# A heading that says hardware counts when its answer opens with an NVIDIA GPU's name.
_HARDWARE_KEYS = {"hardware"}
# A form's field for the writer's GPU, answered in the writer's words: open-gpu-kernel-modules'
# "### Hardware: GPU" ("rtx5090", NVIDIA/open-gpu-kernel-modules#888). The answer must open with
# the name ("Nvidia pro 6000 blackwell max-q workstation", #949), not a sentence ("Its a RTX 2060
# from GIGABYTE, ...", #265); one pasted from a tool is that tool's parser's: `nvidia-smi -L`'s
# "GPU 0: NAME (UUID: ...)" (#433), lspci's "NVIDIA Corporation GB203M / GN22 [...] [10de:2c18]"
# (#935).
_FORM_GPU_KEYS = {"hardware: gpu"}
_FORM_NAME = re.compile(r"(?:NVIDIA|GeForce|Quadro|Tesla|TITAN|RTX|GTX|Jetson|[A-Z]{0,3}\d)", re.I)
_TOOL_ANSWER = re.compile(r"GPU \d{1,2}:|[^\n]*?(?:\bCorporation\b|\[10de:)", re.IGNORECASE)
# Words of a requirement or a wish, not of a GPU someone has: "RTX 4090 or better".
_WISH = re.compile(
    r"\b(?:or|and|better|higher|above|newer|later|minimum|min|required|requires?|recommended"
    r"|needed|like|similar|equivalent|etc|any|e\.g)\b|[<>=+?]",
    re.IGNORECASE,
)
_PCI_KEYS = {"pci device/subsystem", "pci id", "pci device id", "pci device"}

_TIMES = r"[ \t]?[x\u00d7][ \t]?"  # "2x", "2 x", and with the multiplication sign
_KNOWN = re.compile(rf"(?:(\d{{1,2}}){_TIMES})?([A-Za-z][\w -]{{1,60}}.*)")
_COUNT = re.compile(rf"(?:(\d{{1,2}}){_TIMES})?({gpus.NAME_START}\b.*)")
_MEMORY = r"[ \t]+\d{1,5}[ \t]?(?i:GB|GiB|G|MB|MiB)\b"
_NAME_END = re.compile(
    rf",|[ \t][_*]{{0,2}}\(|[ \t]{_TIMES}\d|{_MEMORY}|[ \t]+with[ \t]|[ \t]{{2}}"
)
# A count after the name: "NAME x2", "NAME (x2)", "NAME (2x)".
_COUNT_AFTER = re.compile(
    rf"[ \t](?:{_TIMES}(\d{{1,2}})\b|\([x\u00d7][ \t]?(\d{{1,2}})\)|\((\d{{1,2}})[ \t]?[x\u00d7]\))"
)
# The capability stated in the bracket right after a GPU's name: "(compute_cap 12.1, sm_121)",
# "(compute capability: 8.6)".
_BRACKET = re.compile(r"[ \t][_*]{0,2}\(([^()\n]{0,120})\)")
_BRACKET_CAPABILITY = re.compile(
    r"(?:^|[ ,;])compute[ _]cap(?:ability)?[ \t]{0,2}[:=]?[ \t]{0,2}(\d{1,2}\.\d)(?![\d.])",
    re.IGNORECASE,
)
_DRIVER = re.compile(r"v?(\d{3}\.\d{1,3}(?:\.\d{1,3})?)(?![\d.])")
_CUDA = re.compile(r"(\d{1,2}\.\d)(?![\d.])")
# The driver's branch before its version: Studio (NSD), Game Ready (GRD) or DCH
# (keylase/nvidia-patch#651), or its package's name ("nvidia-driver-580.105.08",
# NVIDIA/open-gpu-kernel-modules#1001; "nvidia-driver-570-open" names a branch, no driver).
_BRANCH = re.compile(
    r"(?:(?:NSD|GRD|DCH|Studio|Game Ready)[ \t]{1,4}|nvidia-driver-(?=\d{3}\.\d))?"
)
# nvidia-smi's header pair typed on one line: "CUDA Version: 12.8 (Driver 570.181)"
# (pytorch/pytorch#160804); read right after the CUDA version, nowhere else on the line.
_CUDA_DRIVER = re.compile(r"[ \t]{1,4}\((?:NVIDIA[ \t])?[Dd]river(?:[ \t]version)?:?[ \t]{1,4}")
# The driver's CUDA in parentheses right after the driver: "Driver: 595.79 (CUDA 13.2)",
# "Driver: 580.126.18 (supports CUDA 13.0)" (immich-app/immich#28031; a range, "(supports CUDA
# 12.4+)", is a requirement's and stays unread), or after a comma when the line says nvidia-smi
# shows it: "Driver: 592.27, CUDA 13.1 (per nvidia-smi)" (ollama/ollama#17222); a bare ", CUDA
# 12.8" may be the toolkit's.
_DRIVER_CUDA = re.compile(
    r"[ \t]{1,4}\((?:supports[ \t])?CUDA(?:[ \t]Version)?:?[ \t]{1,4}(\d{1,2}\.\d)\)"
    r"|,[ \t]{1,4}CUDA(?:[ \t]Version)?:?[ \t]{1,4}(\d{1,2}\.\d)"
    r"[ \t]{1,4}\((?:per|from|by)[ \t]nvidia-smi\)"
)
# A bare "CUDA: X.Y" with nvcc's version after it on its line: "CUDA: 13.1 / NVCC 13.2"
# (ggml-org/llama.cpp#22499) names the toolkit apart, so a CUDA version that is not nvcc's release
# is the driver's; "CUDA: 12.8 / NVCC 12.8.93" names one toolkit twice and stays unread, and so
# does any such line where the text names PyTorch, whose build's CUDA people also call "CUDA".
_TORCH = re.compile(r"\b(?:py)?torch\b", re.IGNORECASE)
_BESIDE_NVCC = re.compile(
    r"(\d{1,2}\.\d)[ \t]{0,4}/[ \t]{0,4}nvcc:?[ \t]{1,4}V?(\d{1,2}\.\d)(?:\.\d{1,3})?(?![\d.])",
    re.IGNORECASE,
)
# A driver written with its digits masked, a branch and no more ("53x.xx", "5xx", "535.xx"):
# no driver is read from it, but the CUDA version in parentheses after it is the driver's ("-
# Driver: 53x.xx (supports CUDA 12.5)", abetlen/llama-cpp-python#2234).
_MASKED_DRIVER = re.compile(r"[3-9][\dx]{2}(?:\.[\dx]{1,3}){0,2}(?![\w.])", re.IGNORECASE)
_PCI = re.compile(r"10de:([0-9a-fA-F]{4})\b")
# A driver after the GPU's name, the line's last word: fastfetch's GPU line with a --gpu-format
# that adds its driver field ("GPU: NVIDIA GeForce GTX 750 Ti 535.113.01",
# fastfetch-cli/fastfetch#597), or a person's "GPU: RTX 3080 (531.18)" (XuehaiPan/nvitop#55).
_TRAILING_DRIVER = re.compile(r"\(?(\d{3}\.\d{2}(?:\.\d{2})?|\d{3}\.\d{3}\.\d{2})\)?")
_TRIM = "`*_ \t"
# A value that opens with a markdown link: "[572.75](https://...572.75.exe)" reads as its text.
_LINK = re.compile(r"\[([^\[\]\n]{1,100})\]\([^()\s]{1,500}\)")
# A hardware answer names the machine's parts joined by " + " ("Ryzen 5 2600 + MSI 1660 Ti
# Ventus 6GB OC", ggml-org/llama.cpp#28018; "Tesla P40 + 3090", #11401; "AMD EPYC 7773X + 2x RTX
# 3090 TI", #11200), and there a GeForce number may stand alone, after a board maker's name.
_PARTS = re.compile(r"[ \t]\+[ \t]")
_LABEL = re.compile(r"[:;\uff1a]")
_COUNT_FIRST = re.compile(rf"(?:\d{{1,2}}{_TIMES})?")
_BOARD_MAKERS = r"MSI|ASUS|Gigabyte|EVGA|Zotac|PNY|Palit|Gainward|Inno3D|Colorful|Galax|KFA2"
_GEFORCE_NUMBER = re.compile(
    rf"(?:(\d{{1,2}}){_TIMES})?((?:(?:{_BOARD_MAKERS})[ \t])?"
    r"(10[5-8]0|16[3-6]0|20[6-8]0|30[5-9]0|40[6-9]0|50[5-9]0)(?:[ \t]?(Ti|SUPER))?\b.*)",
    re.IGNORECASE,
)


def _unlinked(value: str) -> str:
    """The value with a markdown link at its start replaced by the link's text."""
    link = _LINK.match(value)
    return link.group(1) + value[link.end() :] if link else value


def _key(raw: str) -> str:
    """A list key lower-cased with single spaces, in English."""
    return _KEY_NAMES.get(raw, " ".join(raw.lower().split()))


def _entries(text: str) -> list[tuple[str, str]]:
    """(key, value) of every list line in order, the key lower-cased with single spaces: "key:
    value" lines, and GPU and driver bullets separated by " - " on other lines."""
    found = [(m.start(), _key(m.group(1)), m.group(2)) for m in _LINE.finditer(text)]
    lines = {start for start, _, _ in found}
    for m in _DASH_LINE.finditer(text):
        key = _key(m.group(1))
        if m.start() not in lines and (key in _GPU_KEYS or key in _DRIVER_KEYS):
            found.append((m.start(), key, m.group(2)))
    return [(key, _unlinked(value.strip(_TRIM)).strip(_TRIM)) for _, key, value in sorted(found)]


def _name_end(value: str) -> re.Match[str] | None:
    """Where a GPU's name ends in a value: a comma, a bracket, a count, its memory (unless the
    model's name holds it, "RTX 3050 6GB"), "with", or a wide gap."""
    end = _NAME_END.search(value)
    if (
        end is not None
        and re.fullmatch(_MEMORY, end.group(0))
        and gpus.memory_named(value[: end.end()])
    ):
        return _NAME_END.search(value, end.end())
    return end


def _gpus(value: str) -> list[Gpu]:
    """The GPUs a GPU line names: none unless an NVIDIA name or one the GPU catalogue knows
    ("L20", "RTX 5070"); "2x NAME", "NAME x2" and "NAME (x2)" are two."""
    found = _COUNT.fullmatch(value)
    if found is None:
        found = _KNOWN.fullmatch(value)
        end = _name_end(value)
        if found is None or gpus.lookup(value[: end.start() if end else None]) is None:
            return []
    end = _name_end(found.group(2))
    name = found.group(2)[: end.start() if end else None].strip(_TRIM)
    after = _COUNT_AFTER.match(found.group(2), end.start()) if end else None
    counted = next((group for group in after.groups() if group), None) if after else None
    count = int(found.group(1) or counted or 1)
    capability = _bracket_capability(name, found.group(2), end.start()) if end else None
    if not name or not 0 < count <= 16:
        return []
    return [Gpu(name=name, compute_capability=capability) for _ in range(count)]


def _bracket_capability(name: str, value: str, pos: int) -> str | None:
    """The capability the bracket at `pos`, right after the name, states, where the catalogue
    agrees or does not know the model."""
    bracket = _BRACKET.match(value, pos)
    stated = _BRACKET_CAPABILITY.search(bracket.group(1)) if bracket else None
    if stated is None:
        return None
    model = gpus.lookup(name)
    agrees = model is None or model.compute_capability == stated.group(1)
    return stated.group(1) if agrees else None


def _name_driver(value: str) -> tuple[str, str | None]:
    """A GPU line's value without a driver after the name, and that driver."""
    head, _, last = value.rstrip().rpartition(" ")
    found = _TRAILING_DRIVER.fullmatch(last)
    if not head.strip() or found is None or last.startswith("(") != last.endswith(")"):
        return value, None
    return head.rstrip(), found.group(1)


def _paired_driver(value: str, pos: int) -> str | None:
    """The driver in "(Driver 570.181)" right after the CUDA version at `pos`, closed by ")"."""
    head = _CUDA_DRIVER.match(value, pos)
    driver = _DRIVER.match(value, head.end()) if head else None
    if driver is None or not value.startswith(")", driver.end()):
        return None
    return driver.group(1)


def _beside_nvcc(value: str) -> str | None:
    """The driver's CUDA in a bare CUDA line's value that names nvcc's other version after it."""
    found = _BESIDE_NVCC.fullmatch(value)
    return found.group(1) if found and found.group(1) != found.group(2) else None


def _known_gpus(value: str) -> list[Gpu]:
    """The GPUs a line that stands alone names: each one the catalogue knows, and no wording of a
    requirement anywhere in the value."""
    found = [] if _WISH.search(value) else _gpus(value)
    return found if all(gpus.lookup(gpu.name) for gpu in found) else []


def _geforce_number(part: str) -> list[Gpu]:
    """A hardware part that is a GeForce model number alone ("3090", "2x 3090", "MSI 1660 Ti
    Ventus"), as GPUs with the capability of the model the number is; else none."""
    found = _GEFORCE_NUMBER.fullmatch(part)
    if found is None:
        return []
    series = "GTX" if found.group(3)[:2] in ("10", "16") else "RTX"
    suffix = f" {found.group(4)}" if found.group(4) else ""
    model = gpus.lookup(f"{series} {found.group(3)}{suffix}")
    end = _name_end(found.group(2))
    name = found.group(2)[: end.start() if end else None].strip(_TRIM)
    count = int(found.group(1) or 1)
    if model is None or not 0 < count <= 16:
        return []
    return [Gpu(name=name, compute_capability=model.compute_capability) for _ in range(count)]


def _part_gpus(part: str) -> list[Gpu]:
    """The GPUs one part of a hardware answer names: a GPU's name first (after a count), one the
    catalogue knows, or a GeForce number alone. A part that names GPUs in more than one of its
    comma pieces lists machines, not one machine's GPUs ("A100, 3090", llama.cpp#15589), and a
    label ("Card name: ...") is the tool's it came from: both are left alone."""
    if _LABEL.search(part):
        return []
    named = [
        found
        for piece in part.split(",")
        if (found := _form_gpus(piece.strip(_TRIM)) or _geforce_number(piece.strip(_TRIM)))
    ]
    return named[0] if len(named) == 1 else []


def _form_gpus(piece: str) -> list[Gpu]:
    """The GPUs of a piece that opens with a GPU's name ("2x RTX 3090", "A100"), never a system's
    ("Dgx Spark")."""
    counted = _COUNT_FIRST.match(piece)
    start = counted.end() if counted else 0
    return _known_gpus(piece) if _FORM_NAME.match(piece, start) else []


def _hardware_gpus(value: str) -> list[Gpu]:
    """The GPUs of a hardware answer, from each part joined by " + "; none when a part words a
    requirement ("RTX 3060+")."""
    parts = [part.strip(_TRIM) for part in _PARTS.split(value)]
    if any(_WISH.search(part) for part in parts):
        return []
    return [gpu for part in parts for gpu in _part_gpus(part)]


def _driver(value: str) -> tuple[str | None, str | None]:
    """(driver, the driver's CUDA) at the start of a driver line's value, after the name of its
    branch ("NSD 616.56", keylase/nvidia-patch#1110)."""
    branch = _BRANCH.match(value)
    driver = _DRIVER.match(value, branch.end() if branch else 0)
    if driver is None:
        return None, _masked_cuda(value)
    cuda = _DRIVER_CUDA.match(value, driver.end())
    return driver.group(1), (cuda.group(1) or cuda.group(2)) if cuda else None


def _masked_cuda(value: str) -> str | None:
    """The CUDA version in parentheses after a driver whose digits are masked ("53x.xx")."""
    masked = _MASKED_DRIVER.match(value)
    if masked is None or "x" not in masked.group(0).lower():
        return None
    cuda = _DRIVER_CUDA.match(value, masked.end())
    return cuda.group(1) if cuda else None


def _form_answer(value: str) -> bool:
    """Whether a form's GPU answer opens with a GPU's name in the writer's words."""
    return _FORM_NAME.match(value) is not None and _TOOL_ANSWER.match(value) is None


def _headings(text: str) -> HostFacts:
    """The GPUs and driver an issue form's headings answer."""
    facts = HostFacts()
    for found in [*_HEADING.finditer(text), *_BOLD_HEADING.finditer(text)]:
        key = " ".join(found.group(1).lower().split())
        if key.endswith("?"):
            key = "gpu" if _GPU_QUESTION.fullmatch(key) else ""
        value = found.group(2).strip(_TRIM).rstrip(".")  # "515.43.04." ends a sentence
        form = key in _FORM_GPU_KEYS and _form_answer(value)
        if key in _HARDWARE_KEYS and not facts.gpus:
            facts.gpus = _hardware_gpus(value)
        elif (key in _LONE_GPU_KEYS or form) and not facts.gpus:
            facts.gpus = _known_gpus(value)
        elif key in _DRIVER_KEYS and facts.driver.version is None:
            facts.driver.version, facts.driver.cuda_version = _driver(value)
    return facts


def _list(text: str) -> HostFacts:
    """The GPUs, driver, CUDA version and PCI ids of a list's `key: value` lines."""
    facts = HostFacts()
    pci: list[str] = []
    generic: list[Gpu] = []  # named under a key that may name the machine
    after_name: str | None = None
    torch = _TORCH.search(text) is not None
    for key, value in _entries(text):
        if key in _GPU_KEYS:
            name, driver = _name_driver(value)
            found = _gpus(name)
            (generic if key in _GENERIC_GPU_KEYS else facts.gpus).extend(found)
            after_name = after_name or (driver if found else None)
        elif key in _DRIVER_KEYS and facts.driver.version is None:
            facts.driver.version, paired = _driver(value)
            facts.driver.cuda_version = facts.driver.cuda_version or paired
        elif key in _CUDA_KEYS and facts.driver.cuda_version is None:
            cuda = _CUDA.match(value)
            facts.driver.cuda_version = cuda.group(1) if cuda else None
            if cuda is not None and facts.driver.version is None:
                facts.driver.version = _paired_driver(value, cuda.end())
        elif key == "cuda" and facts.driver.cuda_version is None and not torch:
            facts.driver.cuda_version = _beside_nvcc(value)
        elif key in _PCI_KEYS:
            device = _PCI.match(value)
            if device:
                pci.append(f"10de:{device.group(1).lower()}")
    facts.driver.version = facts.driver.version or after_name
    facts.gpus = facts.gpus or generic
    if len(pci) == len(facts.gpus):
        for gpu, device_id in zip(facts.gpus, pci, strict=True):
            gpu.pci_device_id = device_id
    return facts


def _stated(facts: HostFacts) -> int:
    return sum(1 for fact in (facts.gpus, facts.driver.version, facts.driver.cuda_version) if fact)


def _lone_gpus(text: str) -> list[Gpu]:
    """The GPUs of lines that may stand alone, each one the catalogue knows."""
    return [
        gpu for key, value in _entries(text) if key in _LONE_GPU_KEYS for gpu in _known_gpus(value)
    ]


def parse_env_list(text: str) -> HostFacts:
    """The GPUs, driver, CUDA version and PCI ids a hand-written list or issue form states."""
    listed = _list(text)
    if _stated(listed) < 2:  # a list of one fact: only GPU lines the catalogue knows count
        listed = HostFacts(gpus=_lone_gpus(text))
    headed = _headings(text)
    if listed.gpus:  # the same GPU, typed twice
        headed.gpus = []
    facts = merge(headed, listed)
    if facts.gpus and clinfo.detect_opencl_listing(text):  # its "Device name" lines are its own
        facts.gpus = []
    return facts


def detect_env_list(text: str) -> bool:
    return _stated(parse_env_list(text)) > 0


FORMATS = [Format("environment list", detect_env_list, parse_env_list)]

# No probe: written by people, not printed by a tool.
PROBES: list[Probe] = []
