"""LM Studio's hardware JSON: the GPUs its survey found, as its bug tracker asks for them.

LM Studio 0.3 copies its runtime's hardware survey (lmstudio-ai/lmstudio-bug-tracker#334):

    "gpuSurveyResult": { "result": {...}, "gpuInfo": [ { "name": "Quadro P1000", "deviceId": 0,

and 0.2.x its system information (lmstudio-ai/lmstudio-bug-tracker#62):

    "gpu": { "gpu_names": [ "NVIDIA GeForce RTX 2080 Ti", "NVIDIA GeForce GTX 1080" ],
             "vram_recommended_capacity": "19.00 GB", ...

Pastes are often cut, so the text is read with patterns, not as JSON. Each survey result (one per
model format) lists the same GPUs: only the first list is read, up to its "]". Only NVIDIA names
count (the survey lists AMD and Intel GPUs too); no driver or CUDA version is shown.
"""

from __future__ import annotations

import re

from checks.facts import gpus
from checks.facts.model import Gpu, HostFacts
from checks.facts.parsers import Format
from checks.facts.probe import Probe

_SURVEY = re.compile(r'"gpuSurveyResult"[ \t]{0,4}:')
_GPU_INFO = re.compile(r'"gpuInfo"[ \t]{0,4}:[ \t]{0,4}\[')
_EMPTY = re.compile(r"\s{0,200}\]")
_CLOSE = re.compile(r"\n[ \t]{0,40}\]")  # the list's "]" on a line of its own
_INFO_NAME = re.compile(r'\{\s{0,200}"name"[ \t]{0,4}:[ \t]{0,4}"([^"\\\n]{1,200})"')
_GPU_NAMES = re.compile(r'"gpu_names"[ \t]{0,4}:[ \t]{0,4}\[([^\]]{0,4000})\]')
_VRAM_KEY = re.compile(r'"vram_(?:recommended_capacity|unused)"[ \t]{0,4}:')
_STRING = re.compile(r'"([^"\\\n]{1,200})"')
_NVIDIA_NAME = re.compile(rf"{gpus.NAME_START} ")


def _names(text: str) -> list[str]:
    """The GPU names of the first survey's gpuInfo list, or else of the first gpu_names list."""
    info = _GPU_INFO.search(text) if _SURVEY.search(text) else None
    if info is not None:
        if _EMPTY.match(text, info.end()):
            return []
        close = _CLOSE.search(text, info.end())
        end = close.start() if close else len(text)
        return [m.group(1) for m in _INFO_NAME.finditer(text, info.end(), end)]
    names = _GPU_NAMES.search(text) if _VRAM_KEY.search(text) else None
    return _STRING.findall(names.group(1)) if names else []


def parse_lmstudio(text: str) -> HostFacts:
    """One Gpu per NVIDIA name LM Studio lists."""
    facts = HostFacts()
    for name in _names(text):
        if _NVIDIA_NAME.match(name.strip()):
            facts.gpus.append(Gpu(name=name.strip()))
    return facts


def detect_lmstudio(text: str) -> bool:
    return any(_NVIDIA_NAME.match(name.strip()) for name in _names(text))


FORMATS = [Format("LM Studio hardware JSON", detect_lmstudio, parse_lmstudio)]

# No probe: LM Studio shows this in its app.
PROBES: list[Probe] = []
