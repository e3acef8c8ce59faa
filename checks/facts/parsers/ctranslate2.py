"""CTranslate2's device log: each CUDA GPU's name and compute capability.

With CT2_VERBOSE (faster-whisper and its front ends turn it on) CTranslate2 logs the devices it
found (src/utils.cc) through spdlog, a line per GPU:

    [2025-04-30 09:09:39.177] [ctranslate2] [thread 6904] [info] GPU #0: NVIDIA GeForce RTX 5060
    Ti (CC=12.0)

(one line). The capability is the CUDA runtime's; a name of another vendor stays unread.
"""

from __future__ import annotations

import re

from checks.facts import gpus
from checks.facts.model import Gpu, HostFacts
from checks.facts.parsers import Format
from checks.facts.probe import Probe

_DEVICE = re.compile(
    r"\[ctranslate2\] \[thread \d{1,10}\] \[info\] GPU #(\d{1,2}): ([^\n]{1,120})"
    r" \(CC=(\d{1,2}\.\d{1,2})\)[ \t]*$",
    re.MULTILINE,
)


def parse_ctranslate2(text: str) -> HostFacts:
    """One Gpu per device line that names an NVIDIA GPU."""
    facts = HostFacts()
    for device in _DEVICE.finditer(text):
        name = device.group(2).strip()
        if not gpus.is_nvidia(name):
            continue
        facts.gpus.append(
            Gpu(index=int(device.group(1)), name=name, compute_capability=device.group(3))
        )
    return facts


def detect_ctranslate2(text: str) -> bool:
    return bool(parse_ctranslate2(text).gpus)


FORMATS = [Format("CTranslate2 device log", detect_ctranslate2, parse_ctranslate2)]

# No probe: CTranslate2 logs its devices when it starts with CT2_VERBOSE set.
PROBES: list[Probe] = []
