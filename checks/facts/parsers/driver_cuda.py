"""The CUDA version the driver reports, written as the driver's own version on a line alone.

nvidia-smi's header shows the CUDA version the driver supports beside the driver's number, and
people often give that one as the driver's (kzhang2/aoneus#2, beside pip's builds and the
toolkit):

    torch             2.9.1+cu128
    Driver 13.0
    CUDA toolkit 12.8

No NVIDIA driver is numbered like a CUDA release (major 10 to 13 and a minor, nothing more): a
line that is the word "Driver" (a "- " bullet, bold or a colon allowed) and such a number is the
driver's CUDA, where the text is about CUDA. Drivers of other devices carry three or four parts
("Driver version: 12.19.1.32"), and "Driver version" alone may be a tool's label for another
number, so neither is read.
"""

from __future__ import annotations

import re

from checks.facts.model import HostFacts
from checks.facts.parsers import Format
from checks.facts.probe import Probe

_LINE = re.compile(
    r"^[ \t]{0,4}(?:[-*+][ \t]{1,4})?(?:\*\*)?(?:NVIDIA[ \t])?Driver(?:\*\*)?(?::(?:\*\*)?)?"
    r"[ \t]{1,4}(1[0-3]\.\d)[ \t]*$",
    re.MULTILINE | re.IGNORECASE,
)
_CUDA = re.compile(r"\bCUDA\b|\+cu1\d{2}\b")


def parse_driver_cuda(text: str) -> HostFacts:
    """The driver's CUDA from the first such line, in a text that names CUDA."""
    facts = HostFacts()
    found = _LINE.search(text)
    if found is not None and _CUDA.search(text) is not None:
        facts.driver.cuda_version = found.group(1)
    return facts


def detect_driver_cuda(text: str) -> bool:
    return parse_driver_cuda(text).driver.cuda_version is not None


FORMATS = [Format("driver's CUDA as the driver", detect_driver_cuda, parse_driver_cuda)]

# No probe: written by people, not printed by a tool.
PROBES: list[Probe] = []
