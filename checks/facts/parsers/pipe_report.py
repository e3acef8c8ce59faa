"""An environment report on one line, its "Key: value" fields joined by " | ".

Scripts and custom nodes print what torch sees in one line (naxci1/ComfyUI-FlashVSR_Stable#21):

    Python: 3.12.3 | PyTorch: 2.9.1+cu130 | CUDA disponible: True | CUDA (torch): 13.0 |
    GPU: NVIDIA GeForce RTX 5090 | Compute capability: (12, 0)

(one line in the paste). The GPU field counts when its value is a name as torch gives it, one that
starts with NVIDIA's words, and no wording of a wish; the capability field, torch's "(12, 0)" or
"12.0", is that GPU's. A line counts only where every field is a "Key: value" pair: a markdown
table's "| GPU | RTX 4090 |" is not one. The CUDA fields are torch's build, not the driver's.
"""

from __future__ import annotations

import re

from checks.facts import gpus
from checks.facts.model import Gpu, HostFacts
from checks.facts.parsers import Format
from checks.facts.probe import Probe

_LINE = re.compile(
    r"^[A-Za-z][^\n|]{0,80}: [^\n|]{1,120}(?: \| [^\n|]{1,160}){1,15}$", re.MULTILINE
)
_FIELD = re.compile(r"([A-Za-z][\w ()/.-]{0,30}): ([^\n]{1,120})")
_GPU_KEYS = ("gpu", "detected gpu", "gpu name", "device name")
_CC_KEYS = ("compute capability", "cuda capability", "capability")
_NAME = re.compile(rf"{gpus.NAME_START}\b[^,;()\[\]]{{1,80}}")
_CC = re.compile(r"\((\d{1,2}), ?(\d)\)|(\d{1,2})\.(\d)")
_WISH = re.compile(r"\b(?:or|better|minimum|recommended|required|like|e\.g)\b", re.IGNORECASE)


def _fields(line: str) -> dict[str, str] | None:
    """The line's fields by key, lower-cased; None unless every field is a "Key: value" pair."""
    found: dict[str, str] = {}
    for part in line.split(" | "):
        field = _FIELD.fullmatch(part.strip())
        if field is None:
            return None
        found.setdefault(" ".join(field.group(1).lower().split()), field.group(2).strip())
    return found


def _gpu(fields: dict[str, str]) -> Gpu | None:
    """The GPU the fields name, with the capability they give."""
    value = next((fields[key] for key in _GPU_KEYS if key in fields), "")
    name = _NAME.fullmatch(value)
    if name is None or _WISH.search(value):
        return None
    cc = next((_CC.fullmatch(fields[key]) for key in _CC_KEYS if key in fields), None)
    major, minor = (cc.group(1) or cc.group(3), cc.group(2) or cc.group(4)) if cc else (None, None)
    return Gpu(name=value.strip(), compute_capability=f"{major}.{minor}" if cc else None)


def parse_pipe_report(text: str) -> HostFacts:
    """The GPU of the first one-line report that names one."""
    for line in _LINE.finditer(text):
        fields = _fields(line.group(0))
        gpu = _gpu(fields) if fields else None
        if gpu is not None:
            return HostFacts(gpus=[gpu])
    return HostFacts()


def detect_pipe_report(text: str) -> bool:
    return bool(parse_pipe_report(text).gpus)


FORMATS = [Format("one-line report", detect_pipe_report, parse_pipe_report)]

# No probe: the line is another program's printout, pasted.
PROBES: list[Probe] = []
