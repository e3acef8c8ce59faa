"""The open-gpu-kernel-modules issue form's driver: its "NVIDIA Open GPU Kernel Modules Version".

NVIDIA's form, and the forks that keep it, ask for the version of the modules in use, answered
under its heading (tinygrad/open-gpu-kernel-modules#30, NVIDIA/open-gpu-kernel-modules#626):

    ### NVIDIA Open GPU Kernel Modules Version

    570.86.15

The modules run with the userspace driver of their own version, so the answer is the driver's. A
fork may add its name to the version ("565.57.01-p2p", tinygrad's P2P modules,
tinygrad/open-gpu-kernel-modules#29), a package its revision ("-1"): the version before it is
NVIDIA's. Only an answer that is one whole version counts: a branch ("565", "580-open,
570-open"), a list or a sentence says nothing of the modules in use.
"""

from __future__ import annotations

import re

from checks.facts.model import HostFacts
from checks.facts.parsers import Format
from checks.facts.probe import Probe

_ANSWER = re.compile(
    r"^#{2,4}[ \t]{1,4}NVIDIA Open GPU Kernel Modules Version[ \t]*\n(?:[ \t]{0,8}\n){1,2}"
    r"[ \t]{0,8}`?v?(\d{3}\.\d{2,3}(?:\.\d{2,3})?)(?:-[A-Za-z0-9][A-Za-z0-9.~+]{0,20})?`?[ \t]*$",
    re.MULTILINE,
)


def parse_open_kmod_form(text: str) -> HostFacts:
    """The driver the form's modules version answers, when that answer is one version."""
    found = _ANSWER.search(text)
    facts = HostFacts()
    facts.driver.version = found.group(1) if found else None
    return facts


def detect_open_kmod_form(text: str) -> bool:
    return _ANSWER.search(text) is not None


FORMATS = [Format("open-gpu-kernel-modules form", detect_open_kmod_form, parse_open_kmod_form)]

# No probe: an issue form is written by people, not printed by a tool.
PROBES: list[Probe] = []
