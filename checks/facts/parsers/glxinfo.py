"""glxinfo and glxgears -info: the GPU from the OpenGL renderer, the driver from the version.

NVIDIA's OpenGL library names the GPU with its bus and instruction set after slashes, and puts
its own driver version after "NVIDIA" in every version string (Witko/nvidia-xrun#76):

    OpenGL renderer string: GeForce GTX 1050/PCIe/SSE2
    OpenGL core profile version string: 4.6.0 NVIDIA 396.54
    OpenGL ES profile version string: OpenGL ES 3.2 NVIDIA 396.54
    GL_RENDERER   = GeForce GTX 1050/PCIe/SSE2
    GL_VERSION    = 4.6.0 NVIDIA 396.54

`unity_support_test -p` prints the same strings with aligned colons (sosreport/sos#482). Mesa's
strings ("Mesa 23.2.1", "NV137" for nouveau, "llvmpipe") are not NVIDIA's driver and are left
alone. One X screen, one renderer: the first one names the GPU, unless lspci in the same paste
names it as "GM107GLM [Quadro M2000M]" (OpenSimulationInterface/osi-visualizer#15): lspci's reader
has that GPU, and a second one would count it twice.

linuxgamebench's "System Information" block takes both from glxinfo and prints them as a pair
(taaderbe/linuxgamebench#4):

    GPU: NVIDIA GeForce RTX 5070 Ti
    Driver: NVIDIA 590.48.01
"""

from __future__ import annotations

import re

from checks.facts import gpus
from checks.facts.model import Gpu, HostFacts
from checks.facts.parsers import Format
from checks.facts.probe import Probe

# A line may be quoted in single backticks inside prose (taaderbe/linuxgamebench#4).
_START = r"^[ \t]{0,8}`?"
_VERSION = re.compile(
    _START + r"(?:OpenGL (?:core profile |ES profile )?version string:|GL_VERSION[ \t]{0,20}=)"
    r"[ \t]{1,20}(?:OpenGL ES )?\d{1,2}\.\d{1,2}(?:\.\d{1,3})? NVIDIA"
    r" (\d{2,4}\.\d{1,3}(?:\.\d{1,3})?)\b",
    re.MULTILINE,
)
_RENDERER = re.compile(
    _START + r"(?:OpenGL renderer string:|GL_RENDERER[ \t]{0,20}=)[ \t]{1,20}"
    rf"({gpus.NAME_START}\b[^/\n`]{{1,120}})/(?:PCIe|PCI|AGP)/",
    re.MULTILINE,
)

_SUMMARY = re.compile(
    rf"^GPU: ({gpus.NAME_START}\b[^\n]{{1,120}})\n"
    r"Driver: NVIDIA (\d{2,4}\.\d{1,3}(?:\.\d{1,3})?)[ \t]*$",
    re.MULTILINE,
)


def parse_glxinfo(text: str) -> HostFacts:
    """The driver from NVIDIA's OpenGL version strings; the GPU from the first renderer line."""
    facts = HostFacts()
    version = _VERSION.search(text)
    summary = _SUMMARY.search(text)
    if version is None and summary is None:
        return facts
    facts.driver.version = version.group(1) if version else summary.group(2) if summary else None
    renderer = _RENDERER.search(text)
    name = renderer.group(1).strip() if renderer else summary.group(1).strip() if summary else None
    if name and f"[{name}]" not in text:
        facts.gpus.append(Gpu(name=name))
    return facts


def detect_glxinfo(text: str) -> bool:
    return _VERSION.search(text) is not None or _SUMMARY.search(text) is not None


FORMATS = [Format("glxinfo", detect_glxinfo, parse_glxinfo)]

# No probe: nvidia-smi reports the driver on a host; glxinfo is for pasted output.
PROBES: list[Probe] = []
