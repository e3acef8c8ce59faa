"""`ls -l` of the driver's libraries: the userspace driver version libcuda.so.1 links to.

The driver installs libcuda.so.VERSION and links its soname to it; a container started with the
NVIDIA runtime gets the host's files mounted in, and `ls -l` there shows the link
("/usr/lib/x86_64-linux-gnu/libcuda.so.1 -> libcuda.so.525.147.05" after the mode, owner, size
and date, ollama/ollama#6383; NVIDIA/nvidia-container-toolkit#1055).

The link line is read as `ls -l` prints it (type and mode, links, owner, group, size, date, then
the path and its target), the path a whole one: a listing of bare names may be any folder's. A
forward-compatibility libcuda (a compat/ folder, cuda-compat) is not the driver's, a link to
another name ("libcuda.so.1 -> libcuda.so", a stub) names no version, and where the links name
different versions none is read.
"""

from __future__ import annotations

import re

from checks.facts.model import HostFacts
from checks.facts.parsers import Format
from checks.facts.probe import Probe

_MODE = re.compile(r"l[rwxsStT-]{9}[.+@]?[ \t]")
_SONAME = "/libcuda.so.1"
_TARGET = re.compile(r"(?:/\S{0,400}/)?libcuda\.so\.(\d{3}\.\d{1,3}(?:\.\d{1,3})?)")
MIN_FIELDS = 8  # mode, links, owner, group, size, two date fields at least, the path


def _linked(line: str) -> str | None:
    """The version a `ls -l` line of libcuda.so.1's link names, or None."""
    if _MODE.match(line) is None:
        return None
    head, arrow, target = line.rstrip().partition(" -> ")
    fields = head.split()
    if not arrow or len(fields) < MIN_FIELDS or not fields[4].isdigit():
        return None
    path = fields[-1]
    found = _TARGET.fullmatch(target.strip())
    if not path.startswith("/") or not path.endswith(_SONAME) or found is None:
        return None
    return None if "compat" in path or "compat" in target else found.group(1)


def parse_library_listing(text: str) -> HostFacts:
    """The driver version libcuda.so.1 links to, where every such link names the same one."""
    versions = {version for line in text.split("\n") if (version := _linked(line.strip()))}
    facts = HostFacts()
    facts.driver.version = versions.pop() if len(versions) == 1 else None
    return facts


def detect_library_listing(text: str) -> bool:
    return parse_library_listing(text).driver.version is not None


FORMATS = [Format("ls -l of the driver's libraries", detect_library_listing, parse_library_listing)]

# No probe: nvidia-smi and NVML report the driver; a listing is read from a paste.
PROBES: list[Probe] = []
