"""Kokkos' start-up check of the device it runs on: the capability it was built for, and the
device's.

Kokkos::Cuda::initialize compares the architecture its kernels were compiled for with the
device's compute capability and says so when they differ (kokkos/kokkos#7887, #602, #1944):

    Kokkos::Cuda::initialize WARNING: running kernels compiled for compute capability 10.0 on
    device with compute capability 12.0 , this will likely reduce potential performance.
    Kokkos::Cuda::initialize ERROR: running kernels compiled for compute capability 0.0 (< 5.0)
    on device with compute capability 5.0 (>=5.0), this would give incorrect results!

The device is one GPU of that capability, unnamed; the first number is the build's target, never
a GPU's. Each capability the messages name is one GPU (a test suite prints the message once per
test). It is a fallback: a tool's list of GPUs, anywhere in the text, wins.
"""

from __future__ import annotations

import re

from checks.facts.model import Gpu, HostFacts
from checks.facts.parsers import Format
from checks.facts.probe import Probe

_INITIALIZE = re.compile(
    r"Kokkos::Cuda::initialize (?:WARNING|ERROR): running kernels compiled for compute"
    r" capability \d{1,2}\.\d{1,2}(?: \([<>]=? ?\d{1,2}\.\d{1,2}\))? on device with compute"
    r" capability (\d{1,2}\.\d)(?![\d.])"
)


def parse_kokkos(text: str) -> HostFacts:
    """One unnamed GPU for each device capability Kokkos' start-up messages name."""
    capabilities = dict.fromkeys(m.group(1) for m in _INITIALIZE.finditer(text))
    return HostFacts(gpus=[Gpu(compute_capability=cc) for cc in capabilities])


def detect_kokkos(text: str) -> bool:
    return _INITIALIZE.search(text) is not None


FORMATS = [Format("Kokkos device check", detect_kokkos, parse_kokkos, fallback=True)]

# No probe: Kokkos prints it when a program built with it starts.
PROBES: list[Probe] = []
