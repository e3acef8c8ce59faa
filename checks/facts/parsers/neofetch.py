"""neofetch's summary: the GPUs on its "GPU:" lines.

neofetch prints one "GPU: " line per GPU beside its ASCII art, the name from lspci with the
vendor's short name first, and the memory as "used / total" in MiB (dylanaraps/neofetch#876):

       /ssssssssssshdmNNNNmyNMMMMhssssss/      GPU: NVIDIA GeForce GT 520
        .ossssssssssssssssssdMMMNysssso.       Memory: 1583MiB / 7979MiB

Only the first run of GPU lines is read (an issue may paste the summary twice); other tools'
"GPU:" lines (fastfetch's "Memory: 5.06 GiB / 31.27 GiB") do not count. No driver version.

fastfetch, its successor, keys its lines "GPU" or, for more than one, "GPU 1", "GPU 2", and
prints the vendor and name, then what it knows of cores, " @ " clock, " - " temperature, memory
in parentheses, and last the type, " [Discrete]" or " [Integrated]" (src/modules/gpu/gpu.c in
fastfetch-cli/fastfetch; fastfetch-cli/fastfetch#497):

    GPU: NVIDIA GeForce RTX 2070 SUPER (8.24 GiB) [Discrete]

That closing type tag marks a fastfetch line; its numbering is fastfetch's, not CUDA's.
"""

from __future__ import annotations

import re

from checks.facts import gpus
from checks.facts.model import Gpu, HostFacts
from checks.facts.parsers import Format
from checks.facts.probe import Probe

_GPU = re.compile(rf"(?:^|[ \t])GPU\d{{0,2}}: ({gpus.NAME_START}\b[^\n]{{1,120}})$", re.MULTILINE)
_ANY_GPU = re.compile(r"(?:^|[ \t])GPU\d{0,2}: ", re.MULTILINE)
_FASTFETCH_GPU = re.compile(
    rf"(?:^|[ \t])GPU(?: \d{{1,2}})?: ({gpus.NAME_START}\b[^\n]{{0,160}}?)"
    r" \[(?:Discrete|Integrated)\][ \t]*$",
    re.MULTILINE,
)
# What fastfetch appends after the name: " (cores)" or " (memory)", " @ clock", " - temperature".
_FASTFETCH_TAIL = re.compile(r" \(| @ | - ")
_MEMORY = re.compile(r"(?:^|[ \t])Memory: \d{1,9}MiB / \d{1,9}MiB[ \t]*$", re.MULTILINE)


def _names(text: str) -> list[str]:
    """The NVIDIA names of the first run of consecutive GPU lines."""
    names: list[str] = []
    last = -2
    for number, line in enumerate(text.split("\n")):
        found = _ANY_GPU.search(line)
        if found is None:
            continue
        if names and number != last + 1:
            break
        last = number
        gpu = _GPU.match(line, found.start())
        if gpu is not None:
            names.append(gpu.group(1).strip())
    return names


def parse_neofetch(text: str) -> HostFacts:
    """One Gpu per NVIDIA GPU line of neofetch's summary."""
    facts = HostFacts()
    if _MEMORY.search(text) is None:
        return facts
    for name in _names(text):
        cut = name.endswith(("...", "…")) or name.count("[") != name.count("]")
        facts.gpus.append(Gpu(name=None if cut else name))
    return facts


def detect_neofetch(text: str) -> bool:
    return _MEMORY.search(text) is not None and bool(_names(text))


def parse_fastfetch(text: str) -> HostFacts:
    """One Gpu per NVIDIA GPU line of fastfetch's summary, named up to what follows the name."""
    facts = HostFacts()
    for match in _FASTFETCH_GPU.finditer(text):
        value = match.group(1)
        tail = _FASTFETCH_TAIL.search(value)
        name = value[: tail.start() if tail else None].strip()
        facts.gpus.append(Gpu(name=None if name.endswith(("...", "…")) else name))
    return facts


def detect_fastfetch(text: str) -> bool:
    return _FASTFETCH_GPU.search(text) is not None


FORMATS = [
    Format("neofetch", detect_neofetch, parse_neofetch),
    Format("fastfetch", detect_fastfetch, parse_fastfetch),
]

# No probe: nvidia-smi and NVML name the GPUs; neofetch is for pasted output.
PROBES: list[Probe] = []
