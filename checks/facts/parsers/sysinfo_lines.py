"""GPUs named on lines of their own in an issue form's "System Info" answer.

Forms ask for the system in one free field, and people answer with bare lines, a GPU among them,
often with its count (xorbitsai/inference#4057 and #3178):

    ### System Info / 系統信息

    ubuntu 22.04.4
    nvidia5090 * 4
    cuda 12.4

A line counts when it is a GPU's name and nothing else (a "GPU " word, a bullet, a count before
or after it with "x", "\u00d7" or "*", and its memory in brackets allowed): a name the catalogue
knows, or NVIDIA's word run into a GeForce number ("nvidia5090", read as the RTX 5090 it is). The
name stays as written. A bare "cuda 12.4" there may be the toolkit's and is not read.

Outside a form, people list their machine the same way, the GPU's line right below the line of
its operating system (ggml-org/llama.cpp#5976, janhq/jan#1350):

    Nvidia CUDA tools installed
    Win11
    RTX3080ti

    Windows 11 pro
    RTX 4080 (16 GB)
    32 gigs ram.

There the GPU lines right below a line that is an operating system's name alone count, where
every such line of the text names one model. It is a fallback: a tool's list of GPUs, anywhere in
the text, wins.
"""

from __future__ import annotations

import re

from checks.facts import gpus
from checks.facts.model import Gpu, HostFacts
from checks.facts.parsers import Format
from checks.facts.probe import Probe

_SECTION = re.compile(r"^#{2,4}[ \t]{1,4}System Info(?:rmation)?\b[^\n]{0,80}\n", re.MULTILINE)
_HEADING = re.compile(r"^#{1,6}[ \t]", re.MULTILINE)
# A model after NVIDIA's words: a GeForce series and number, a workstation or data-center model
# in NVIDIA's own case, or a GeForce number alone right after "NVIDIA".
_NAME = (
    r"(?:(?i:NVIDIA|GeForce|Tesla|Quadro)[ ]?){0,3}"
    r"(?:(?i:RTX|GTX)[ ]?\d{4}(?:[ ]?(?i:Ti|SUPER|D))?|RTX[ ](?:A|PRO[ ])\d{3,4}"
    r"|[ABHKLPTV]\d{1,3}S?|(?<=(?i:NVIDIA))[ ]?(?P<number>(?:10|16|20|30|40|50)[5-9]0))"
    r"(?:[ ]\d{1,3}[ ]?GB)?"
)
_TIMES = r"[ ]?[x\u00d7*][ ]?"
_LINE = re.compile(
    rf"(?:[-*+][ ])?(?:GPU:?[ ])?(?:(?P<before>\d{{1,2}}){_TIMES})?(?P<name>{_NAME})"
    rf"(?:{_TIMES}(?P<after>\d{{1,2}}))?(?:[ ]\(\d{{1,3}}[ ]?GB\))?"
)
# A line that is an operating system's name alone, with its release and edition: "Win11",
# "Windows 11 pro", "Ubuntu 22.04 LTS", "Fedora 39 server"; other words make it a sentence.
_OS_LINE = re.compile(
    r"(?:[-*+][ ])?(?:OS:?[ ])?(?:Win(?:dows)?[ ]?(?:7|8|8\.1|10|11)|Ubuntu|Debian|Fedora"
    r"|Arch(?:[ ]Linux)?|Manjaro|Linux[ ]Mint|Pop!_OS|openSUSE|CentOS|Rocky(?:[ ]Linux)?|NixOS)"
    r"(?:[ ](?:\d[\w.]{0,11}|LTS|Pro|Home|Enterprise|Education|Server|Workstation|Desktop"
    r"|Leap|Tumbleweed|x64|x86_64|amd64|aarch64|64-bit)){0,3}",
    re.IGNORECASE,
)
MAX_COUNT = 16


def _sections(text: str) -> list[str]:
    """The text of each System Info answer, up to the next heading."""
    found = []
    for section in _SECTION.finditer(text):
        end = _HEADING.search(text, section.end())
        found.append(text[section.end() : end.start() if end else len(text)])
    return found


def _capability(name: str, number: str | None) -> str | None:
    """The capability of the model a name is: a GeForce number alone is that GeForce."""
    if number is not None:
        series = "GTX" if number[:2] in ("10", "16") else "RTX"
        model = gpus.lookup(f"{series} {number}")
    else:
        model = gpus.lookup(name)
    return model.compute_capability if model is not None else None


def _line_gpus(line: str) -> list[Gpu]:
    """The GPUs a line that is a GPU's name alone, with its count, names."""
    found = _LINE.fullmatch(line.strip())
    if found is None or (found.group("before") and found.group("after")):
        return []
    name = found.group("name")
    capability = _capability(name, found.group("number"))
    count = int(found.group("before") or found.group("after") or 1)
    if capability is None or not 0 < count <= MAX_COUNT:
        return []
    return [Gpu(name=name, compute_capability=capability) for _ in range(count)]


def _below_os(text: str) -> list[Gpu]:
    """The GPUs of the lines right below a line that is an operating system's name alone, where
    they all name one model."""
    found: list[Gpu] = []
    below = False
    for line in text.split("\n"):
        gpus_here = _line_gpus(line) if below else []
        found += gpus_here
        below = bool(gpus_here) or _OS_LINE.fullmatch(line.strip()) is not None
    models = {gpus.lookup(gpu.name) for gpu in found if gpu.name}
    return found if len(models) == 1 else []


def parse_sysinfo_lines(text: str) -> HostFacts:
    """The GPUs the lines of every System Info answer name, else those right below an operating
    system's line."""
    facts = HostFacts()
    for section in _sections(text):
        facts.gpus += [gpu for line in section.split("\n") for gpu in _line_gpus(line)]
    facts.gpus = facts.gpus or _below_os(text)
    return facts


def detect_sysinfo_lines(text: str) -> bool:
    return bool(parse_sysinfo_lines(text).gpus)


FORMATS = [
    Format("System Info answer lines", detect_sysinfo_lines, parse_sysinfo_lines, fallback=True)
]

# No probe: written by people, not printed by a tool.
PROBES: list[Probe] = []
