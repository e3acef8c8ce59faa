"""A compute capability written in brackets right after a GPU's name.

People give their GPU's capability beside its name (LostRuins/koboldcpp#1272, a laptop's card
whose name covers two chips, GK107 (3.0) and GK208 (3.5)):

    ... moved to different laptop with i7-4500U and GT 740M(CUDA 10.1, Compute Capability 3.5)

The words "compute capability" and a major.minor number stand in the brackets that follow the
name, after other asides at most ("CUDA 10.1, "). Prose names GPUs people do not have as well, so
this reading adds no GPU: it only fills in the capability of a GPU of the same model that a
tool's output in the text lists, where the catalogue does not give another one.

A bullet that names a GPU first and gives nvidia-smi's answer for it beside the name states the
GPU the writer queried (mudler/vllm.cpp#168):

    - NVIDIA Jetson AGX Thor, `aarch64`, `nvidia-smi compute_cap = 11.0`, 122 GB unified memory

The name is the bullet's first comma-separated part, one the catalogue knows, and another part
is the query's field and value alone ("compute_cap = 11.0", after "nvidia-smi"). It counts where
the catalogue gives the same capability and every such bullet of the text names one model; it is
a fallback: a tool's list of GPUs, anywhere in the text, wins.
"""

from __future__ import annotations

import re

from checks.facts import gpus
from checks.facts.model import Gpu, HostFacts
from checks.facts.parsers import Format
from checks.facts.probe import Probe

# A GPU's name as people type it: NVIDIA's words, then a series and number with a mobile "M"
# ("GT 740M") or a data-center or workstation model in NVIDIA's own case ("K40m", "P100"), and
# its memory where NVIDIA names the model with it ("GTX 1060 6GB").
_NAME = (
    r"(?:(?:NVIDIA|GeForce|Tesla|Quadro)[ ]){0,3}"
    r"(?:(?:RTX|GTX|GTS|GT|MX)[ -]?\d{3,4}M?(?:[ ](?:Ti|SUPER))?"
    r"|RTX[ ](?-i:A|PRO[ ])\d{3,4}|TITAN[ ](?:RTX|Xp|X|V)"
    r"|(?-i:GB\d{2,3}|GH200|[ABHKLPTV]\d{1,3}[SmX]?))"
    r"(?:[ ]\d{1,2}[ ]?GB)?(?:[ ]Laptop[ ]GPU)?"
)
_STATED = re.compile(
    rf"(?<![\w-])({_NAME})(?:[ ]GPU)?[ ]?\((?:[^()\n]{{0,60}}?[ ,])?"
    r"compute[ ]capability:?[ ]{1,4}(\d{1,2}\.\d)(?![\d.])[^()\n]{0,60}\)",
    re.IGNORECASE,
)


def parse_stated_capability(text: str) -> HostFacts:
    """Each GPU named with its capability in brackets, where the catalogue agrees or does not
    know the model."""
    facts = HostFacts()
    for found in _STATED.finditer(text):
        name, capability = found.group(1), found.group(2)
        model = gpus.lookup(name)
        if model is None or model.compute_capability == capability:
            facts.gpus.append(Gpu(name=name, compute_capability=capability))
    return facts


def detect_stated_capability(text: str) -> bool:
    return bool(parse_stated_capability(text).gpus)


_BULLET = re.compile(r"^[ \t]{0,4}[-*+][ \t]{1,4}([^\n]{1,300})$", re.MULTILINE)
_QUERIED = re.compile(
    r"(?:nvidia-smi[ ]{1,4}(?:--query-gpu=)?)?compute_cap[ ]{0,2}[=:][ ]{0,2}(\d{1,2}\.\d)"
)
_TRIM = "`*_ \t"


def _queried(bullet: str) -> Gpu | None:
    """The GPU a bullet names first, with the capability a query answer beside it gives."""
    first, *rest = (part.strip(_TRIM) for part in bullet.split(","))
    answers = {found.group(1) for part in rest if (found := _QUERIED.fullmatch(part))}
    model = gpus.lookup(first) if len(answers) == 1 and first else None
    if model is None or model.compute_capability not in answers:
        return None
    return Gpu(name=first, compute_capability=model.compute_capability)


def parse_queried_bullet(text: str) -> HostFacts:
    """The GPU a bullet names beside nvidia-smi's compute_cap answer, where every such bullet
    names one model."""
    found = [gpu for m in _BULLET.finditer(text) if (gpu := _queried(m.group(1)))]
    if len({(gpu.name, gpu.compute_capability) for gpu in found}) != 1:
        return HostFacts()
    return HostFacts(gpus=found[:1])


def detect_queried_bullet(text: str) -> bool:
    return bool(parse_queried_bullet(text).gpus)


FORMATS = [
    Format(
        "capability beside a GPU's name",
        detect_stated_capability,
        parse_stated_capability,
        annotates=True,
    ),
    Format(
        "GPU bullet with its queried capability",
        detect_queried_bullet,
        parse_queried_bullet,
        fallback=True,
    ),
]

# No probe: written by people, not printed by a tool.
PROBES: list[Probe] = []
