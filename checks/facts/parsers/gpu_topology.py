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

A paste cut above the header (unslothai/unsloth#3872, sgl-project/sglang#29162) still shows how
many GPUs there are when its last GPU row is followed by the first other device's row:

    GPU7    NV18    NV18    NV18    NV18    NV18    NV18    NV18     X      SYS     SYS ...
    NIC0    PIX     NODE    SYS     SYS     SYS     SYS     SYS     SYS      X      NODE ...

each GPU row marks itself "X" in its own column, in order, and the device row's "X" stands in the
column right after the last GPU's (here column 8: GPU0 to GPU7). Rows cut before another device's
row give no count and stay unread.
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


def _marks_itself(cells: list[str], index: int) -> bool:
    """Whether a matrix row has "X" in column `index` (cells[0] is the row's name)."""
    return len(cells) > index + 1 and cells[index + 1] == "X"


def _headless(text: str) -> list[int]:
    """The GPU columns of a matrix cut above its header: GPU rows in order, each marking itself,
    then another device's row marking the column right after the last GPU's."""
    last: int | None = None
    for line in text.split("\n"):
        cells = _ESCAPE.sub("", line).split()
        row = _GPU.fullmatch(cells[0]) if cells else None
        if row is not None:
            index = int(row.group(1))
            ordered = last is None or index == last + 1
            last = index if ordered and _marks_itself(cells, index) else None
        elif last is not None and _marks_itself(cells, last + 1):
            return list(range(last + 1))
        else:
            last = None
    return []


def parse_gpu_topology(text: str) -> HostFacts:
    """One Gpu (index only) per row of the first topology matrix, or of one cut above its header."""
    indices = _indices(text) if _HEADER.search(text) else []
    return HostFacts(gpus=[Gpu(index=index) for index in indices or _headless(text)])


def detect_gpu_topology(text: str) -> bool:
    return bool(parse_gpu_topology(text).gpus)


FORMATS = [Format("nvidia-smi topology matrix", detect_gpu_topology, parse_gpu_topology)]

# No probe: NVML and nvidia-smi's table name the GPUs; the matrix is read from pasted output.
PROBES: list[Probe] = []
