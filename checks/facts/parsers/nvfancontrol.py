"""nvfancontrol's log: the driver version and each graphics adapter it finds over NV-CONTROL.

nvfancontrol logs both at start-up, after its level (foucault/nvfancontrol#8, #31):

    INFO - NVIDIA driver version: 381.22
    INFO - NVIDIA graphics adapter #1: GeForce GT 650M
    INFO - NVIDIA graphics adapter #0: NVIDIA GeForce GTX 1070

Its releases number the adapters from 1 (2017) or from 0 (2021), so the number is no GPU index;
it only tells an adapter logged again (a second run in the same paste) from another one.
"""

from __future__ import annotations

import re

from checks.facts.model import Gpu, HostFacts
from checks.facts.parsers import Format
from checks.facts.probe import Probe

_DRIVER = re.compile(
    r"^INFO - NVIDIA driver version: (\d{3}\.\d{1,3}(?:\.\d{1,3})?)[ \t]*$", re.MULTILINE
)
_ADAPTER = re.compile(
    r"^INFO - NVIDIA graphics adapter #(\d{1,2}): ([^\n]{1,100}?)[ \t]*$", re.MULTILINE
)


def parse_nvfancontrol(text: str) -> HostFacts:
    """The driver nvfancontrol reports and one Gpu, without an index, per adapter number."""
    facts = HostFacts()
    driver = _DRIVER.search(text)
    facts.driver.version = driver.group(1) if driver else None
    seen: set[str] = set()
    for number, name in _ADAPTER.findall(text):
        if number not in seen and name.strip():
            seen.add(number)
            facts.gpus.append(Gpu(name=name.strip()))
    return facts


def detect_nvfancontrol(text: str) -> bool:
    return _DRIVER.search(text) is not None or _ADAPTER.search(text) is not None


FORMATS = [Format("nvfancontrol log", detect_nvfancontrol, parse_nvfancontrol)]

# No probe: nvfancontrol is a fan daemon; its log is for pasted output.
PROBES: list[Probe] = []
