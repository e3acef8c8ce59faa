"""What Jetson helper scripts print about the board: its L4T release and its model.

jetson-inference's docker/run.sh and jetson-containers' build scripts read the release from
/etc/nv_tegra_release and say so on the line before it (dusty-nv/jetson-inference#1438,
dusty-nv/ros_deep_learning#129):

    reading L4T version from /etc/nv_tegra_release
    L4T BSP Version:  L4T R35.4.1

The banner counts only after that line: other scripts print the same banner with a release they
fix themselves, not the board's.

Seeed's reComputer (jetson-examples) names the board by its device-tree model, lower-cased, and
checks the release against the ones an example supports (Seeed-Projects/jetson-examples#35, #28):

    INFO: machine[nvidia jetson orin nano engineering reference developer kit super] confirmed...
    L4T VERSION 36.4.4 is not in the allowed versions list.

(or "... is in the allowed: OK!"); an example's own bare "L4T_VERSION: 36.3.0" is not read, as
other scripts print that key for the release they build for.

A Jetson's GPU is its module's integrated GPU, so a model that names a Jetson the catalogue knows
is the GPU; like jetson-stats' board, it counts only where no tool's output lists a GPU.
"""

from __future__ import annotations

import re

from checks.facts import gpus
from checks.facts.model import Gpu, HostFacts
from checks.facts.parsers import Format
from checks.facts.probe import Probe

_RELEASE = r"(\d{2,3}\.\d{1,2}\.\d{1,2})"
_BSP = re.compile(
    r"^reading L4T version from /etc/nv_tegra_release[ \t]*\n"
    rf"L4T BSP Version:[ \t]{{1,4}}L4T R{_RELEASE}[ \t]*$",
    re.MULTILINE,
)
_ALLOWED = re.compile(rf"^L4T VERSION {_RELEASE} is (?:not )?in the allowed\b", re.MULTILINE)
_MACHINE = re.compile(r"^INFO: machine\[([^\[\]\n]{1,120})\] confirmed\.\.\.[ \t]*$", re.MULTILINE)
_JETSON = re.compile(r"\bjetson\b", re.IGNORECASE)


def parse_l4t_banner(text: str) -> HostFacts:
    """The L4T release jetson-inference's scripts read from /etc/nv_tegra_release."""
    found = _BSP.search(text)
    facts = HostFacts()
    facts.system.l4t_release = found.group(1) if found else None
    return facts


def detect_l4t_banner(text: str) -> bool:
    return _BSP.search(text) is not None


def parse_recomputer(text: str) -> HostFacts:
    """The release reComputer checked and the Jetson its device-tree model names."""
    facts = HostFacts()
    release = _ALLOWED.search(text)
    facts.system.l4t_release = release.group(1) if release else None
    machine = _MACHINE.search(text)
    name = machine.group(1).strip() if machine else ""
    if _JETSON.search(name) and gpus.lookup(name) is not None:
        facts.gpus.append(Gpu(name=name))
    return facts


def detect_recomputer(text: str) -> bool:
    return _ALLOWED.search(text) is not None or bool(parse_recomputer(text).gpus)


FORMATS = [
    Format("jetson-inference L4T banner", detect_l4t_banner, parse_l4t_banner),
    Format("reComputer run", detect_recomputer, parse_recomputer, fallback=True),
]

# No probe: these are other tools' scripts; nv_tegra_release itself is read by the jetson parser.
PROBES: list[Probe] = []
