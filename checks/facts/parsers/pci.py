"""`lspci` (plain, `-nn`, `-v`, `-D`): the NVIDIA GPUs on the PCI bus, named as pci.ids names them.

A GPU is a display-class function of NVIDIA Corporation: "VGA compatible controller [0300]",
"3D controller [0302]" or "Display controller [0380]". Its name is the device as lspci prints it
("GH100 [H200 SXM 141GB]"); an id pci.ids does not know yet ("Device 2b85") gives no name, and a
name cut off inside a bracket gives none either. No driver and no CUDA: lspci shows neither.
"""

from __future__ import annotations

import re

from checks.facts.model import Gpu, HostFacts
from checks.facts.parsers import Format
from checks.facts.probe import Probe

# "0000:1b:00.0 3D controller [0302]: NVIDIA Corporation GH100 [H200 SXM 141GB] [10de:2335] ...",
# maybe inside inline code.
_LINE = re.compile(
    r"^`?(?P<slot>(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])[ \t]+"
    r"(?:VGA compatible controller|3D controller|Display controller)"
    r"(?:[ \t]\[03[0-9a-fA-F]{2}\])?:[ \t]+NVIDIA Corporation[ \t]+(?P<rest>[^\n]*)$",
    re.MULTILINE,
)
# What follows the name, right to left: "(prog-if 00 [VGA controller])", "(rev a1)", the id.
# Each starts with a fixed character and the text is stripped between them, so a long run of
# blanks is never rescanned.
_PROG_IF = re.compile(r"\(prog-if [0-9a-fA-F]{2}(?: \[[^\]\n]*\])?\)$")
_REV = re.compile(r"\(rev [0-9a-fA-F]{2}\)$")
_ID = re.compile(r"\[10de:([0-9a-fA-F]{4})\]?$")
_UNKNOWN = re.compile(r"Device ([0-9a-fA-F]{4})")


def _device(rest: str) -> tuple[str | None, str | None]:
    """(name, "10de:xxxx") of what follows "NVIDIA Corporation"; either may be unknown."""
    rest = rest.rstrip().rstrip("`")  # inline code in an issue: `01:00.0 3D controller: ...`
    for suffix in (_PROG_IF, _REV):
        rest = rest.rstrip()
        cut = suffix.search(rest)
        rest = rest[: cut.start()] if cut else rest
    rest = rest.rstrip()
    found = _ID.search(rest)
    device_id = found.group(1).lower() if found else None
    name = rest[: found.start()].strip() if found else rest.strip()
    unknown = _UNKNOWN.fullmatch(name)
    if unknown is not None:
        return None, f"10de:{(device_id or unknown.group(1)).lower()}"
    # A name cut off inside a bracket or by "...": a part of a name could name another GPU.
    partial = not name or name.count("[") != name.count("]") or name.endswith(("...", "…"))
    return None if partial else name, f"10de:{device_id}" if device_id else None


def parse_lspci(text: str) -> HostFacts:
    """One Gpu per NVIDIA display-class line, with its PCI address and device id."""
    facts = HostFacts()
    for line in _LINE.finditer(text):
        name, device_id = _device(line.group("rest"))
        facts.gpus.append(Gpu(name=name, pci_bus_id=line.group("slot").lower(),
                              pci_device_id=device_id))  # fmt: skip
    return facts


def detect_lspci(text: str) -> bool:
    return _LINE.search(text) is not None


FORMATS = [Format("lspci", detect_lspci, parse_lspci)]

# No probe: nvidia-smi and NVML name the GPUs the driver sees; lspci is for pasted output.
PROBES: list[Probe] = []
