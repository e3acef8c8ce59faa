"""A list item that names a GPU and then its driver: the writer's own card.

People list their setup in bullets with no keys, the GPU first and its driver after a comma
(Comfy-Org/ComfyUI#6843, kryptex/krig-miner#5):

    * NVidia A16-8A, driver version 528.24, driver type DCH
      - RTX 5090, sm_120, driver 610.74 (CUDA 13.3)

A driver is installed on a machine, so a GPU named with one in the same item is that machine's.
The item must open with the name, one the catalogue knows (a vGPU type is its board's: "A16-8A"
is an A16), and go on with "driver" or "driver version" and an NNN.NN[.NN] version; an item with
the words of a wish, or items naming different models (two machines compared), are not read. The
driver itself is read where drivers in prose are; the GPU counts only where no tool's output lists
one.
"""

from __future__ import annotations

import re

from checks.facts import gpus
from checks.facts.model import Gpu, HostFacts
from checks.facts.parsers import Format
from checks.facts.probe import Probe

_ITEM = re.compile(
    r"^[ \t]{0,8}[-*+][ \t]{1,4}"
    r"((?:(?:NVIDIA|GeForce|Quadro|Tesla)[ ]){0,3}(?:RTX|GTX|GTS|GT|MX|TITAN|[A-Z]{1,2}\d)"
    r"[^,\n]{0,50}),([^\n]{1,200})$",
    re.MULTILINE | re.IGNORECASE,
)
_DRIVER = re.compile(
    r"(?:^|,)[ \t]{1,4}(?:NVIDIA[ ])?driver(?:[ ]version)?:?[ ]v?\d{3}\.\d{2,3}(?:\.\d{2,3})?\b",
    re.IGNORECASE,
)
_WISH = re.compile(
    r"\b(?:or|better|newer|later|higher|minimum|required|recommended|need|needs|upgrade|like"
    r"|e\.g)\b|[<>=+?]",
    re.IGNORECASE,
)


def _named(text: str) -> list[str]:
    """The GPU names of the items that go on with a driver, each the catalogue knows."""
    found = []
    for item in _ITEM.finditer(text):
        name, rest = item.group(1).strip(), item.group(2)
        if _DRIVER.search(rest) and not _WISH.search(item.group(0)) and gpus.lookup(name):
            found.append(name)
    return found


def parse_gpu_driver_item(text: str) -> HostFacts:
    """The GPU the items name with a driver, when they all name one model."""
    names = _named(text)
    models = {model.name for name in names if (model := gpus.lookup(name)) is not None}
    return HostFacts(gpus=[Gpu(name=names[0])] if len(models) == 1 else [])


def detect_gpu_driver_item(text: str) -> bool:
    return bool(parse_gpu_driver_item(text).gpus)


FORMATS = [
    Format(
        "GPU and driver in a list item",
        detect_gpu_driver_item,
        parse_gpu_driver_item,
        fallback=True,
    )
]

# No probe: written by people, not printed by a tool.
PROBES: list[Probe] = []
