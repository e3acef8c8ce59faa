"""TensorFlow's GPU device log lines: each GPU's name, compute capability and PCI bus id.

TensorFlow 1.x logs a device's properties over the lines after "Found device N with properties:"
(tensorflow/tensorflow#10656, #24227), 2.x on one line after it (NVIDIA/DALI#1813):

    ... gpu_device.cc:1405] Found device 0 with properties:
    name: GeForce 820M major: 2 minor: 1 memoryClockRate(GHz): 1.25
    pciBusID: 0000:08:00.0
    pciBusID: 0000:01:00.0 name: Tesla T4 computeCapability: 7.5

and names a GPU it uses or skips again in one line (tensorflow/tensorflow#62170, #31969, #24227):

    Created TensorFlow device (/job:localhost/replica:0/task:0/device:GPU:0 with 10 MB memory)
      -> physical GPU (device: 0, name: Tesla T4, pci bus id: 0000:00:04.0, compute capability: 7.5)
    Ignoring visible gpu device (device: 0, name: GeForce 820M, pci bus id: 0000:08:00.0,
      compute capability: 2.1) with Cuda compute capability 2.1.

(each on one line). Before 0.11 the skip line said "Ignoring gpu device" and gave the capability
only after the device (tensorflow/tensorflow#29, #4002), a paste may break the line before "with"
(#112):

    Ignoring gpu device (device: 0, name: GRID K520, pci bus id: 0000:00:03.0)
    with Cuda compute capability 3.0. The minimum required Cuda capability is 3.5.

A device is keyed by TensorFlow's number, so a GPU logged again is one GPU.
"""

from __future__ import annotations

import re

from checks.facts.model import Gpu, HostFacts
from checks.facts.parsers import Format
from checks.facts.probe import Probe

_FOUND = re.compile(r"\bFound device (\d{1,2}) with properties:[ \t]*$")
_NAME = re.compile(
    r"^(?:pciBusID: ([0-9a-fA-F:.]{7,16}) )?name: ([^\n]{1,100}?)"
    r"(?: major: (\d{1,2}) minor: (\d{1,2})\b| computeCapability: (\d{1,2}\.\d{1,2})\b|[ \t]*$)"
)
_MAJOR = re.compile(r"^major: (\d{1,2}) minor: (\d{1,2})\b")
_BUS = re.compile(r"^pciBusID:? ([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.\d)\b")
_DEVICE = re.compile(
    r"(?:-> physical GPU|Ignoring (?:visible )?gpu device"
    r"|Creating TensorFlow device \(/gpu:\d{1,2}\) ->)"
    r" \(device: (\d{1,2}), name: ([^,()\n]{1,100}), pci bus id: ([0-9a-fA-F:.]{7,16})"
    r"(?:, compute capability: (\d{1,2}\.\d{1,2}))?\)"
    r"(?:[ \t]{0,4}\n?[ \t]{0,8}with Cuda compute capability (\d{1,2}\.\d{1,2})\.)?"
)
# Lines after "Found device" that still belong to it (properties, not the next log line).
_PROPERTY_LINES = 4


def _found(text: str) -> dict[int, Gpu]:
    """The devices "Found device N with properties:" describes on the lines after it."""
    devices: dict[int, Gpu] = {}
    device: Gpu | None = None
    left = 0
    for line in text.splitlines():
        found = _FOUND.search(line)
        if found is not None:
            device = devices.setdefault(int(found.group(1)), Gpu())
            left = _PROPERTY_LINES
            continue
        if device is None or left == 0:
            continue
        left -= 1
        line = line.strip()
        if (name := _NAME.match(line)) and device.name is None:
            device.name = name.group(2).strip()
            device.pci_bus_id = device.pci_bus_id or name.group(1)
            major = f"{name.group(3)}.{name.group(4)}" if name.group(3) else None
            device.compute_capability = major or name.group(5)
        elif (cc := _MAJOR.match(line)) and device.compute_capability is None:
            device.compute_capability = f"{cc.group(1)}.{cc.group(2)}"
        elif (bus := _BUS.match(line)) and device.pci_bus_id is None:
            device.pci_bus_id = bus.group(1)
    return devices


def parse_tf_devices(text: str) -> HostFacts:
    """One Gpu per TensorFlow device number, in the order they first appear."""
    devices = _found(text)
    for number, name, bus, cc, skipped_cc in _DEVICE.findall(text):
        device = devices.setdefault(int(number), Gpu())
        device.name = device.name or name.strip()
        device.pci_bus_id = device.pci_bus_id or bus
        device.compute_capability = device.compute_capability or cc or skipped_cc or None
    facts = HostFacts()
    facts.gpus = [gpu for gpu in devices.values() if gpu.name]
    return facts


def detect_tf_devices(text: str) -> bool:
    return bool(parse_tf_devices(text).gpus)


FORMATS = [Format("TensorFlow device lines", detect_tf_devices, parse_tf_devices)]

# No probe: nvidia-smi names the GPUs on a host; TensorFlow's log is for pasted output.
PROBES: list[Probe] = []
