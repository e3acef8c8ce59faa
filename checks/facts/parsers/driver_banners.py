"""The driver version from the banners NVIDIA's X driver and nvidia-modeset print when loaded.

Xorg.0.log names the version of NVIDIA's GLX module, part of the userspace driver
(Bumblebee-Project/Bumblebee#553), and dmesg the version of the nvidia-modeset kernel module,
built from the same driver release as nvidia.ko (void-linux/void-packages#1231):

    [  5928.562] (II) NVIDIA GLX Module  334.21  Thu Feb 27 13:54:04 PST 2014
    [   14.762771] nvidia-modeset: Loading NVIDIA Kernel Mode Setting Driver for UNIX platforms
      390.67  Fri Jun  1 03:15:43 PDT 2018

(the second on one line). Both are read only at the start of a line after an optional timestamp.
"""

from __future__ import annotations

import re

from checks.facts.model import HostFacts
from checks.facts.parsers import Format
from checks.facts.probe import Probe

_VERSION = r"[ \t]{1,8}(\d{2,4}\.\d{1,3}(?:\.\d{1,3})?)\b"
_STAMP = r"^[ \t]{0,8}(?:\[[ \t]{0,12}\d{1,10}\.\d{1,9}\][ \t]{1,4})?"
_GLX = re.compile(_STAMP + r"\(II\) NVIDIA GLX Module" + _VERSION, re.MULTILINE)
_MODESET = re.compile(
    _STAMP
    + r"nvidia-modeset: Loading NVIDIA Kernel Mode Setting Driver for UNIX platforms"
    + _VERSION,
    re.MULTILINE,
)


def parse_driver_banners(text: str) -> HostFacts:
    """The GLX module's version as the driver; nvidia-modeset's as the kernel module's."""
    facts = HostFacts()
    if glx := _GLX.search(text):
        facts.driver.version = glx.group(1)
    if modeset := _MODESET.search(text):
        facts.driver.kernel_module_version = modeset.group(1)
    return facts


def detect_driver_banners(text: str) -> bool:
    return _GLX.search(text) is not None or _MODESET.search(text) is not None


FORMATS = [Format("driver banners", detect_driver_banners, parse_driver_banners)]

# No probe: nvidia-smi and /proc/driver/nvidia/version report these on a host.
PROBES: list[Probe] = []
