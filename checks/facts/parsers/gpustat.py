"""gpustat's screen: a header with the host, the time and the driver, then a row per GPU.

gpustat (gpustat/core.py, print_formatted) prints the host padded to the rows' name column, the
local time, and NVML's driver version, then one row per GPU (wookayin/gpustat#157, #130):

    40901                       Fri Jun 30 11:52:07 2023  535.54.03
    [0] NVIDIA GeForce RTX 4090 | 50°C,  73 % | 12894 / 24564 MB | user1(12874M) gdm(4M)
    [1] Tesla P100-PCIE-16GB | 27'C,   0 % |   103 / 16384 MB |

(releases before 1.0 print 'C). The temperature is "??" where NVML does not say; --show-fan,
--show-power and the codec columns only add to the temperature's cell. Memory is in MiB. gpustat
lists AMD GPUs too, so a row counts only when it names an NVIDIA GPU or one the GPU catalogue
knows, and the header's driver only with such a row right below it.
"""

from __future__ import annotations

import re

from checks.facts import gpus
from checks.facts.model import Gpu, HostFacts
from checks.facts.parsers import Format
from checks.facts.probe import Probe

_ROW_HEAD = re.compile(r"\[(\d{1,2})\] (\S[^\n]{0,120})")  # the first cell, on a stripped line
_TEMPERATURE = re.compile(r"[ \t]{0,2}(?:\d{1,3}|\?\?)(?:°|')C, ")
_MEMORY = re.compile(r"[ \t]{1,8}(?:\d{1,7}|\?\?) / [ \t]{0,6}(\d{1,7}|\?\?) MB[ \t]{0,4}")
_DRIVER = re.compile(r"[ \t]{2}(\d{3}\.\d{1,3}(?:\.\d{1,3})?)[ \t]*$")


def _row(line: str) -> Gpu | None:
    """The GPU of a row "[0] NAME | 50°C,  73 % | 12894 / 24564 MB | ...", else None."""
    cells = line.strip().split("|", 3)
    if len(cells) < 4:
        return None
    head = _ROW_HEAD.fullmatch(cells[0].rstrip())
    memory = _MEMORY.fullmatch(cells[2])
    if head is None or memory is None or _TEMPERATURE.match(cells[1]) is None:
        return None
    name = head.group(2)
    if not gpus.is_nvidia(name):
        return None
    total = memory.group(1)
    return Gpu(
        index=int(head.group(1)),
        name=name,
        memory_total_mib=int(total) if total.isdigit() else None,
    )


def parse_gpustat(text: str) -> HostFacts:
    """One Gpu per row naming an NVIDIA GPU (a later screen's rows once), and the driver from
    the header right above the first of them."""
    facts = HostFacts()
    seen: set[int | None] = set()
    previous = ""
    for line in text.split("\n"):
        gpu = _row(line)
        if gpu is not None and gpu.index not in seen:
            if not facts.gpus:
                driver = _DRIVER.search(previous)
                facts.driver.version = driver.group(1) if driver else None
            seen.add(gpu.index)
            facts.gpus.append(gpu)
        previous = line
    return facts


def detect_gpustat(text: str) -> bool:
    return "] " in text and bool(parse_gpustat(text).gpus)


FORMATS = [Format("gpustat", detect_gpustat, parse_gpustat)]

# No probe: gpustat reads NVML, which the nvidia-smi probe reads already; its screen is for pastes.
PROBES: list[Probe] = []
