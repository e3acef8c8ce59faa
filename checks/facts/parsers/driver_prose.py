"""A driver version named in a sentence or a bullet: "driver 570.124.04", "NVIDIA drivers 570.144".

People state their driver in their own words (NVIDIA/TensorRT-LLM#3347, AUTOMATIC1111/
stable-diffusion-webui#16972, mudler/LocalAI#4571, lmstudio-ai/lmstudio-bug-tracker#1186,
NVIDIA/libnvidia-container#241):

    Running cuda-toolkit-12.8, driver 570.124.04, open.
    - NVIDIA drivers 570.144
    nVidia v550.142
    Driver version 581.57 . GPU is detected in Windows
    Transcoding is not working with driver version `550.54.14`

Prose also names drivers people need, had or will install ("requires driver 570.86 or later",
"upgraded from 550.54 to 570.124", "the latest driver is 575.64"), so the read is strict: the
word driver(s), driver version or NVIDIA right before an NNN.NN[.NN] version, or "driver is
[version]" (NVIDIA-developer-blog/code-samples#20: "The nvidia driver is version 418.40.04"), no
wording of a requirement, a change or an install still to come on that line (a step that says it
"Installed ... NVIDIA driver version 571.96" did it, ggml-org/whisper.cpp#2857), and exactly one
driver-shaped version in the whole text (any other NNN.NN[.NN] number, anywhere, and nothing is
read). A false driver is worse than none.
"""

from __future__ import annotations

import re

from checks.facts.model import HostFacts
from checks.facts.parsers import Format
from checks.facts.probe import Probe

_NAMED = re.compile(
    r"(?<![\w.-])(?:[Dd]rivers?(?:[ \t][Vv]ersion)?(?:[ \t]is(?:[ \t][Vv]ersion)?)?|NVIDIA"
    r"|[Nn][Vv]idia)[ \t]`?v?([3-9]\d{2}\.\d{2,3}(?:\.\d{2,3})?)(?!\w|\.\w)"
)
# Every driver-shaped number in the text, whatever names it; a sentence's full stop may end one.
_SHAPE = re.compile(r"(?<![\w.])v?([3-9]\d{2}\.\d{2,3}(?:\.\d{2,3})?)(?!\w|\.\w)")
_WISH = re.compile(
    r"requir|minimum|\bmin\b|at least|or (?:later|newer|higher|above)|>=|\bupgrad|\bupdat"
    r"|\bdowngrad|instead of|\binstall(?!ed\b)|\bfrom\b[^\n]{0,80}\bto\b|recommend|\bneeds?\b"
    r"|\bsupport|\bfix|\bbug\b|\bbroke|\bwith\b[^\n]{0,40}\bor\b|\bshould\b|\blatest\b"
    r"|\bnewest\b",
    re.IGNORECASE,
)


def _line(text: str, pos: int) -> str:
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    return text[start : end if end >= 0 else len(text)]


def parse_driver_prose(text: str) -> HostFacts:
    """The driver a sentence names, when the guards hold; else nothing."""
    facts = HostFacts()
    named = _NAMED.search(text)
    if named is None or {m.group(1) for m in _SHAPE.finditer(text)} != {named.group(1)}:
        return facts
    if _WISH.search(_line(text, named.start())) is None:
        facts.driver.version = named.group(1)
    return facts


def detect_driver_prose(text: str) -> bool:
    return parse_driver_prose(text).driver.version is not None


FORMATS = [Format("driver in prose", detect_driver_prose, parse_driver_prose)]

# No probe: written by people, not printed by a tool.
PROBES: list[Probe] = []
