"""hashcat's backend report (`hashcat -I`, `-II --machine-readable`) and the device list a session
prints at its start: the CUDA version of the driver, the NVIDIA devices, and the driver version
of NVIDIA's OpenCL devices.

hashcat prints the driver's CUDA version (cuDriverGetVersion) as "CUDA.Version.: 12.5" in -I and
as "CUDA API (CUDA 12.2)" over a session's list (hashcat/hashcat#4240, src/terminal.c). Every CUDA
device appears again under OpenCL as an alias, so OpenCL devices count only when no CUDA section
does, and then only under the NVIDIA platform:

    CUDA Info:
    ==========

    CUDA.Version.: 12.5

    Backend Device ID #01 (Alias: #03)
      Name...........: NVIDIA GeForce RTX 4080

A session lists its devices right below the underlined platform line, "skipped" for an alias
(hashcat 4 in hashcat/hashcat#1533):

    OpenCL Platform #1: NVIDIA Corporation
    ======================================
    * Device #1: GeForce GT 710, 500/2001 MB allocatable, 1MCU
"""

from __future__ import annotations

import re

from checks.facts.model import Gpu, HostFacts
from checks.facts.parsers import Format
from checks.facts.probe import Probe

_SECTION = re.compile(r"^(CUDA|HIP|OpenCL|Metal) Info:[ \t]*$")
_HEADINGS = re.compile(_SECTION.pattern, re.MULTILINE)
_KEY = re.compile(r"[ \t]{0,12}([A-Za-z][\w.() ]{0,40}):[ \t]{0,8}")
_CUDA = re.compile(r"(\d{1,2})\.(\d{1,2})")
_PLATFORM = re.compile(r"[ \t]{0,4}(?:OpenCL )?Platform ID #\d{1,3}[ \t]*$")
_DEVICE = re.compile(r"[ \t]{0,8}(?:Backend )?Device ID #\d{1,3}\b")
_OPENCL_CUDA = re.compile(r"OpenCL \d{1,2}\.\d{1,2} CUDA (\d{1,2}\.\d{1,2})(?:\.\d{1,5})?[ \t]*$")
_DRIVER = re.compile(r"\d{3}\.\d{1,3}(?:\.\d{1,3})?")
_NVIDIA = "NVIDIA Corporation"

_API = re.compile(
    r"^(?:CUDA API \(CUDA (\d{1,2}\.\d{1,2})\)"
    r"|OpenCL API \(OpenCL \d{1,2}\.\d{1,2}[^()\n]{0,40}\)"
    r" - Platform #\d{1,3} \[([^\[\]\n]{1,80})\]"
    r"|OpenCL Platform #\d{1,3}: ([^\n]{1,80}?))[ \t]*\n=+[ \t]*$",
    re.MULTILINE,
)
_LISTED = re.compile(r"\* Device #\d{1,3}: ([^,\n]{1,120}?)(, [^\n]*)?$")
_STARTING = re.compile(r"^hashcat \(v\d{1,2}\.\d{1,2}[^()\n]{0,40}\) starting", re.MULTILINE)


def _key(line: str) -> tuple[str, str] | None:
    """("Name", value) of a "  Name...........: value" line; dots and spaces leave the key."""
    found = _KEY.match(line)
    if found is None:
        return None
    return found.group(1).replace(".", "").replace(" ", ""), line[found.end() :].strip()


def parse_backend_info(text: str) -> HostFacts:
    """`hashcat -I`: the CUDA section's version and devices, else NVIDIA's OpenCL platform's."""
    facts = HostFacts()
    cuda: list[Gpu] = []
    opencl: list[Gpu] = []
    section = platform = ""
    device = False  # below a device's heading, where "Name" is the device's
    for line in text.split("\n"):
        heading = _SECTION.match(line)
        if heading is not None or _PLATFORM.match(line):
            section = heading.group(1) if heading is not None else section
            platform, device = ("" if heading is not None else "?"), False
            continue
        if _DEVICE.match(line):
            device = True
            continue
        entry = _key(line)
        if entry is None:
            continue
        key, value = entry
        if section == "CUDA" and key == "CUDAVersion" and (found := _CUDA.fullmatch(value)):
            facts.driver.cuda_version = found.group(0)
        elif section == "CUDA" and device and key == "Name" and value:
            cuda.append(Gpu(name=value))
        elif section == "OpenCL" and not device and key == "Vendor" and platform == "?":
            platform = value
        elif section == "OpenCL" and platform == _NVIDIA:
            if key == "Version" and (found := _OPENCL_CUDA.match(value)):
                facts.driver.cuda_version = facts.driver.cuda_version or found.group(1)
            elif device and key == "Name" and value:
                opencl.append(Gpu(name=value))
            elif device and key == "DriverVersion" and (found := _DRIVER.fullmatch(value)):
                facts.driver.version = facts.driver.version or found.group(0)
    facts.gpus = cuda or opencl
    return facts


def detect_backend_info(text: str) -> bool:
    """hashcat's start line (6.0 says only "starting...") and a backend section's heading."""
    return _STARTING.search(text) is not None and _HEADINGS.search(text) is not None


# `hashcat -II --machine-readable` prints one JSON line; pasted, it is often cut, so the CUDA
# object is read by its keys: its "Version" and each device's "Name", up to the next backend.
_JSON_CUDA = '"CUDAInfo"'
_JSON_NEXT = ('"HIPInfo"', '"OpenCLInfo"', '"MetalInfo"')
_JSON_VERSION = re.compile(r'"Version": "(\d{1,2}\.\d{1,2})"')
_JSON_NAME = re.compile(r'"Name": "([^"\\\n]{1,200})"')


def parse_backend_json(text: str) -> HostFacts:
    """The driver's CUDA version and the CUDA devices of hashcat's machine-readable report."""
    facts = HostFacts()
    start = text.find(_JSON_CUDA)
    if start < 0:
        return facts
    ends = [end for end in (text.find(key, start) for key in _JSON_NEXT) if end > 0]
    body = text[start : min(ends, default=len(text))]
    version = _JSON_VERSION.search(body)
    facts.driver.cuda_version = version.group(1) if version else None
    facts.gpus = [Gpu(name=name) for name in _JSON_NAME.findall(body)]
    return facts


def detect_backend_json(text: str) -> bool:
    return _JSON_CUDA in text and '"BackendDevices"' in text


def parse_session(text: str) -> HostFacts:
    """The devices listed below CUDA's or NVIDIA OpenCL's heading at a session's start."""
    facts = HostFacts()
    cuda: list[Gpu] = []
    opencl: list[Gpu] = []
    for heading in _API.finditer(text):
        version, platform, old_platform = heading.groups()
        if version is None and (platform or old_platform or "").strip() != _NVIDIA:
            continue
        if version is not None:
            facts.driver.cuda_version = facts.driver.cuda_version or version
        listed = cuda if version is not None else opencl
        for line in text[heading.end() + 1 :].split("\n"):
            device = _LISTED.match(line)
            if device is None:
                break
            if (device.group(2) or "") != ", skipped":
                listed.append(Gpu(name=device.group(1).strip()))
    facts.gpus = cuda or opencl
    return facts


def detect_session(text: str) -> bool:
    return _STARTING.search(text) is not None and _API.search(text) is not None


FORMATS = [
    Format("hashcat -I", detect_backend_info, parse_backend_info),
    Format("hashcat -II --machine-readable", detect_backend_json, parse_backend_json),
    Format("hashcat session devices", detect_session, parse_session),
]

# No probe: hashcat is for pasted output.
PROBES: list[Probe] = []
