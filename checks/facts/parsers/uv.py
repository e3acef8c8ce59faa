"""uv's verbose log: the NVIDIA driver version it detects for `--torch-backend=auto`.

uv reads the driver from the kernel module or nvidia-smi and logs it with its source
(astral-sh/uv#12070, #12357, #16651, #14743):

    DEBUG Detected CUDA driver version from `/sys/module/nvidia/version`: 550.144.3
    DEBUG Detected CUDA driver version from `nvidia-smi`: 572.83
    DEBUG Detected CUDA driver version from `/dev/nvidiactl`: 570.133.7

uv holds the version as a PEP 440 version, which prints each number without its leading zero:
550.144.3 is the driver 550.144.03. NVIDIA writes each number after the branch of a desktop or
server driver with two digits or more (550.144.03, 546.01), so a one-digit number there is a
two-digit one without its zero, and the driver is read with the zero put back. A Jetson's module
is numbered otherwise (JetPack 6's 540.4.0): a version whose middle number has one digit is not
read, nor one below the 300s (a Jetson's L4T-numbered 35.3.1). The version uv was given in
UV_CUDA_DRIVER_VERSION is the user's setting, not the host's driver, and is not read either.
"""

from __future__ import annotations

import re

from checks.facts.model import HostFacts
from checks.facts.parsers import Format
from checks.facts.probe import Probe

_DETECTED = re.compile(
    r"Detected CUDA driver version from"
    r" `(?:/dev/nvidiactl|/sys/module/nvidia/version|/proc/driver/nvidia/version|nvidia-smi)`:"
    r" ([3-9]\d{2}\.(?:\d{1,3}|\d{2,3}\.\d{1,3}))[ \t]*$",
    re.MULTILINE,
)


def _padded(version: str) -> str:
    """A driver version as NVIDIA writes it: each number after the branch with two digits."""
    branch, *rest = version.split(".")
    return ".".join([branch, *(part.zfill(2) for part in rest)])


def parse_uv(text: str) -> HostFacts:
    """The driver version uv detected, as NVIDIA writes it."""
    facts = HostFacts()
    found = _DETECTED.search(text)
    facts.driver.version = _padded(found.group(1)) if found else None
    return facts


def detect_uv(text: str) -> bool:
    return _DETECTED.search(text) is not None


FORMATS = [Format("uv driver detection", detect_uv, parse_uv)]

# No probe: the kernel module and nvidia-smi give the driver; uv's log is for pasted output.
PROBES: list[Probe] = []
