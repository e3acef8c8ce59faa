"""InvokeAI: the torch device its start-up log names, and the GPU its issue form's answer names.

InvokeAI logs the device it runs on at start-up (invoke-ai/InvokeAI#6062):

    [2024-03-27 16:40:31,776]::[InvokeAI]::INFO --> Using torch device: NVIDIA GeForce RTX 4090

Its launcher's window wraps long lines at a fixed width, so a name may run onto the next line
("... GTX 1060 with Max-Q D" over "esign", invoke-ai/InvokeAI#8554). A line that starts no record
of the log continues the one above it where that one is as long as another record the same window
wrapped and no record is longer: two records cut at the same length, the longest, are the width.
A device of another vendor, or the CPU, is not read.

InvokeAI's bug form asks for the GPU's vendor and model (invoke-ai/InvokeAI#7936):

    ### GPU vendor

    Nvidia (CUDA)

    ### GPU model

    RTX2000

Where the vendor is NVIDIA's, the model answer is the GPU in the writer's words, even one the
catalogue cannot tell apart ("RTX2000": an RTX 2000 Ada, an RTX A2000, or any RTX 20 card), so its
capability stays unknown; an answer with no model number, a count or the words of a wish is not
read. The device names only the GPU InvokeAI uses, and the form's answer is words, so both count
only where no tool's output lists the GPUs.
"""

from __future__ import annotations

import re
from collections import Counter

from checks.facts import gpus
from checks.facts.model import Gpu, HostFacts
from checks.facts.parsers import Format
from checks.facts.probe import Probe

_RECORD = re.compile(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\]::\[")
_DEVICE = re.compile(r"::\[InvokeAI\]::INFO --> Using torch device: ([^\n]{1,120})$")
MAX_CONTINUED = 3  # lines a wrapped record runs on for, at most
_VENDOR = re.compile(
    r"^###[ \t]GPU vendor[ \t]*\n(?:[ \t]{0,8}\n){1,2}Nvidia \(CUDA\)[ \t]*$",
    re.MULTILINE | re.IGNORECASE,
)
_MODEL = re.compile(
    r"^###[ \t]GPU model[ \t]*\n(?:[ \t]{0,8}\n){1,2}[ \t]{0,8}([^\n]{1,60})$", re.MULTILINE
)
# A model in the writer's words: NVIDIA's words, then a series or a letter, and a model number.
_NAME = re.compile(
    r"(?:(?:NVIDIA|GeForce)[ ]){0,2}(?:(?:RTX|GTX|GTS|GT|MX|Quadro|Tesla|TITAN)[ -]?)?"
    r"[A-Z]{0,2}\d{2,5}(?:[ -][A-Za-z0-9-]{1,12}){0,3}",
    re.IGNORECASE,
)
_WISH = re.compile(r"\b(?:or|and|better|like|similar|any|e\.g)\b|[<>=+?,/]", re.IGNORECASE)


def _records(text: str) -> list[str]:
    """The log's lines, each record joined with the lines its window wrapped it onto."""
    lines = text.split("\n")
    starts = [bool(_RECORD.match(line)) for line in lines]
    cut = Counter(
        len(line)
        for i, line in enumerate(lines[:-1])
        if starts[i] and not starts[i + 1] and lines[i + 1].strip()
    )
    longest = max(
        (len(line) for line, start in zip(lines, starts, strict=True) if start), default=0
    )
    joined: list[str] = []
    i = 0
    while i < len(lines):
        line, width = lines[i], len(lines[i])
        i += 1
        if not starts[i - 1] or cut[width] < 2 or width < longest:
            joined.append(line)
            continue
        for _ in range(MAX_CONTINUED):
            if i >= len(lines) or starts[i] or not lines[i].strip():
                break
            line, i = line + lines[i], i + 1
            if len(lines[i - 1]) != width:
                break
        joined.append(line)
    return joined


def _device(text: str) -> Gpu | None:
    """The NVIDIA GPU InvokeAI's log says torch uses."""
    for line in _records(text):
        found = _DEVICE.search(line) if _RECORD.match(line) else None
        name = found.group(1).strip() if found else ""
        if name and gpus.is_nvidia(name):
            return Gpu(name=name)
    return None


def _answered(text: str) -> Gpu | None:
    """The GPU the form's model answer names, where its vendor answer is NVIDIA's."""
    if _VENDOR.search(text) is None:
        return None
    found = _MODEL.search(text)
    answer = found.group(1).strip().strip("`*_ ") if found else ""
    if _WISH.search(answer) or _NAME.fullmatch(answer) is None:
        return None
    return Gpu(name=answer)


def parse_invokeai(text: str) -> HostFacts:
    """The GPU InvokeAI's log runs on, else the one its form answers."""
    gpu = _device(text) or _answered(text)
    return HostFacts(gpus=[gpu] if gpu else [])


def detect_invokeai(text: str) -> bool:
    return bool(parse_invokeai(text).gpus)


FORMATS = [Format("InvokeAI log / form", detect_invokeai, parse_invokeai, fallback=True)]

# No probe: InvokeAI's log and form are pasted.
PROBES: list[Probe] = []
