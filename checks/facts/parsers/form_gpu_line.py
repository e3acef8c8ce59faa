"""A GPU's name on a line of its own under an issue form's GPU label or its "Other Software".

Bug forms ask for the machine in free text, and people answer with the card's name alone on a
line: under a bare "GPU" label (lmstudio-ai/lmstudio-bug-tracker#1131), or among the lines of the
WSL form's "### Other Software" answer (microsoft/WSL#9821):

    GPU
    RTX Blackwell Pro 6000

    ### Other Software

    HP 2022 OMEN 30L Gaming Desktop
    NVIDIA GeForce RTX 3080 Ti (12GB GDDR6X)

The read is strict: the line is the name and nothing else (a bracket of its memory at most), in
NVIDIA's words (a series word first, each word capitalised or a number, so "RTX 4090 or better"
is no name), one the catalogue knows; under a bare label it is the very next line, and every such
line of the text names one model. It is a fallback: a tool's list of GPUs, anywhere in the text,
wins.
"""

from __future__ import annotations

import re

from checks.facts import gpus
from checks.facts.model import Gpu, HostFacts
from checks.facts.parsers import Format
from checks.facts.probe import Probe

# A bare label line: "GPU", "**GPU**", "GPU:".
_LABEL = re.compile(
    r"(?:\*\*)?(?:GPU|GPUs|GPU model|Graphics card|Video card)(?:\*\*)?:?(?:\*\*)?", re.IGNORECASE
)
_HEADING = re.compile(r"#{2,4}[ \t]{1,4}([^\n]{1,60}?)[ \t]*")
_SECTIONS = {"other software"}  # form headings whose answer may list the machine's parts
_WORD = r"[A-Z0-9][A-Za-z0-9-]{0,14}"
_NAME = re.compile(
    rf"[ \t]{{0,4}}(?:[-*+][ \t]{{1,4}})?((?:NVIDIA[ ])?(?:GeForce|Quadro|Tesla|TITAN|RTX|GTX)"
    rf"(?:[ ]{_WORD}){{1,5}})(?:[ ]\(\d{{1,3}}[ ]?GB(?:[ ]GDDR\w{{1,3}})?\))?[ \t]*"
)


def _named(line: str) -> str | None:
    """The GPU a line that is a name alone names, where the catalogue knows it."""
    found = _NAME.fullmatch(line)
    return found.group(1) if found and gpus.lookup(found.group(1)) else None


def _names(text: str) -> list[str]:
    """Each GPU name alone on a line right under a bare label or in an Other Software answer."""
    names: list[str] = []
    section = ""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        heading = _HEADING.fullmatch(line)
        if heading is not None:
            section = " ".join(heading.group(1).lower().split())
            continue
        under_label = i > 0 and _LABEL.fullmatch(lines[i - 1].strip()) is not None
        if section in _SECTIONS or under_label:
            name = _named(line)
            names.extend([name] if name else [])
    return names


def parse_form_gpu_line(text: str) -> HostFacts:
    """One GPU, where every such line names the same model."""
    names = _names(text)
    models = {model.name for name in names if (model := gpus.lookup(name))}
    if len(models) != 1:
        return HostFacts()
    return HostFacts(gpus=[Gpu(name=names[0])])


def detect_form_gpu_line(text: str) -> bool:
    return bool(parse_form_gpu_line(text).gpus)


FORMATS = [Format("GPU on a form's line", detect_form_gpu_line, parse_form_gpu_line, fallback=True)]

# No probe: written by people, not printed by a tool.
PROBES: list[Probe] = []
