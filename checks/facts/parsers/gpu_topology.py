"""nvidia-smi's topology matrix (`nvidia-smi topo -m`, `topo -p2p`): which GPUs exist, by index.

The matrix names no GPU and no driver, only indices; each GPU has a row whose cell in its own column
is "X" (vLLM's collect_env prints the same matrix under "GPU Topology:"):

            GPU0    GPU1    mlx5_0  CPU Affinity    NUMA Affinity   GPU NUMA ID
    GPU0     X      NV12    SYS     0-23,48-71      0               N/A
    GPU1    NV12     X      SYS     0-23,48-71      0               N/A

The GPUs are the header's columns (GPU0, GPU1, ... in order; a paste cut after some rows still
shows them all), read only when a row under it has "X" in its own column. Their names stay unknown:
other outputs in the same paste name them and merge by index (or by place, when those give none).
The header may carry the terminal's underline escape.
"""

from __future__ import annotations

import re

from checks.facts.model import Gpu, HostFacts
from checks.facts.parsers import Format
from checks.facts.probe import Probe

_ESCAPE = re.compile(r"\x1b\[[0-9;]{0,12}m")
_HEADER = re.compile(r"^[ \t]{0,40}(?:\x1b\[[0-9;]{0,12}m)?GPU0[ \t]", re.MULTILINE)
_GPU = re.compile(r"GPU(\d{1,3})")


def _columns(line: str) -> int:
    """How many GPU columns a header line opens with (GPU0, GPU1, ... in order), else 0."""
    count = 0
    for cell in _ESCAPE.sub("", line).split():
        if cell != f"GPU{count}":
            break
        count += 1
    return count


def _indices(text: str) -> list[int]:
    """The GPU columns of the first matrix with a row that marks itself "X" in its own column."""
    columns = 0
    found: list[int] = []
    for line in text.split("\n"):
        cells = _ESCAPE.sub("", line).split()
        if not cells:
            if found:
                break
            continue
        if _HEADER.match(line) is not None and not found and cells[1:2] != ["X"]:
            columns = _columns(line)
            continue
        row = _GPU.fullmatch(cells[0])
        if columns == 0 or row is None:
            if found:
                break
            continue
        index = int(row.group(1))
        if index < columns and len(cells) > index + 1 and cells[index + 1] == "X":
            found.append(index)
    return list(range(columns)) if found else []


def parse_gpu_topology(text: str) -> HostFacts:
    """One Gpu (index only) per row of the first topology matrix."""
    return HostFacts(gpus=[Gpu(index=index) for index in _indices(text)])


def detect_gpu_topology(text: str) -> bool:
    return _HEADER.search(text) is not None and bool(_indices(text))


FORMATS = [Format("nvidia-smi topology matrix", detect_gpu_topology, parse_gpu_topology)]

# No probe: NVML and nvidia-smi's table name the GPUs; the matrix is read from pasted output.
PROBES: list[Probe] = []
