"""A graphics card report of "Field value" lines, as Speccy's graphics page lays it out.

The card's name heads its fields, each field's value after its name (invoke-ai/InvokeAI#7839):

    NVIDIA GeForce GTX TITAN X
    Manufacturer NVIDIA
    Model GeForce GTX TITAN X
    Device ID 10DE-17C2
    Revision A2
    Subvendor NVIDIA (10DE)

A card counts where "Manufacturer NVIDIA", "Model" and a "Device ID" of NVIDIA's vendor id (10DE)
follow each other; another vendor's card (an integrated Intel GPU listed beside it) is never read.
The name is the heading when it is an NVIDIA name that ends in the model, else the model.
"""

from __future__ import annotations

import re

from checks.facts import gpus
from checks.facts.model import Gpu, HostFacts
from checks.facts.parsers import Format
from checks.facts.probe import Probe

_CARD = re.compile(
    r"^(?:([^\n]{1,100})\n)?Manufacturer[ \t]{1,8}NVIDIA[ \t]*\n"
    r"Model[ \t]{1,8}([^\n]{1,100})\n"
    r"Device ID[ \t]{1,8}10DE-([0-9A-Fa-f]{4})[ \t]*$",
    re.MULTILINE,
)


def _name(heading: str | None, model: str) -> str:
    """The card's name: its heading where that is NVIDIA's name for the model, else the model."""
    head = (heading or "").strip()
    if head.endswith(model) and gpus.is_nvidia(head):
        return head
    return model


def parse_card_report(text: str) -> HostFacts:
    """One Gpu, with its PCI device id, per NVIDIA card the report lists."""
    facts = HostFacts()
    for card in _CARD.finditer(text):
        model = card.group(2).strip()
        if not gpus.is_nvidia(model):
            continue
        device = f"10de:{card.group(3).lower()}"
        facts.gpus.append(Gpu(name=_name(card.group(1), model), pci_device_id=device))
    return facts


def detect_card_report(text: str) -> bool:
    return bool(parse_card_report(text).gpus)


FORMATS = [Format("graphics card report", detect_card_report, parse_card_report)]

# No probe: the report comes from a Windows tool's window, pasted.
PROBES: list[Probe] = []
