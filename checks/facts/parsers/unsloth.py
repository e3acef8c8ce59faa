"""Unsloth's start-up banner: the first GPU's name and compute capability.

Unsloth prints its sloth banner when it loads a model (unsloth/models/llama.py, `statistics`);
the line beside the sloth's ears names device 0 and the next its compute capability, which the
banner calls "CUDA" (`CUDA: {gpu_stats.major}.{gpu_stats.minor}`), beside the toolkit PyTorch was
built with (`CUDA Toolkit: {torch.version.cuda}`). Since 2025 (unslothai/unsloth#1856):

    ==((====))==  Unsloth 2025.3.19: Fast Qwen2 patching. Transformers: 4.50.3.
       \\\\   /|    NVIDIA GeForce RTX 5090. Num GPUs = 1. Max memory: 31.367 GB. Platform: Linux.
    O^O/ \\_/ \\    Torch: 2.8.0.dev20250331+cu128. CUDA: 12.0. CUDA Toolkit: 12.8. Triton: 3.3.0

and in 2024 (unslothai/unsloth#512):

       \\\\   /|    GPU: Tesla P40. Max memory: 23.866 GB. Platform = Linux.
    O^O/ \\_/ \\    Pytorch: 2.3.0+cu121. CUDA = 6.1. CUDA Toolkit = 12.1.

So the banner's "CUDA" is never a CUDA version and neither number is the driver's. The name
is read only with "Num GPUs = 1" or no count (older banners): with more GPUs the banner names
device 0 alone, in PyTorch's order, which need not be nvidia-smi's.
"""

from __future__ import annotations

import re

from checks.facts.model import Gpu, HostFacts
from checks.facts.parsers import Format
from checks.facts.probe import Probe

_GPU_LINE = re.compile(
    r"/\|[ \t]{1,8}(?:GPU: )?(\S[^\n]{0,100}?)\. (?:Num GPUs = (\d{1,2})\. )?"
    r"Max memory: \d{1,4}(?:\.\d{1,3})? GB\. Platform(?::| =) "
)
_CC_LINE = re.compile(
    r"^O\^O/[^\n]{0,12}(?:Torch|Pytorch): \S{1,60}\. CUDA(?::| =) (\d{1,2}\.\d)\. "
    r"CUDA Toolkit(?::| =) ",
    re.MULTILINE,
)


def parse_unsloth(text: str) -> HostFacts:
    """Device 0 of the first banner, when it is the only GPU."""
    found = _GPU_LINE.search(text)
    if found is None or (found.group(2) is not None and found.group(2) != "1"):
        return HostFacts()
    line = text.find("\n", found.end())
    cc = _CC_LINE.match(text, line + 1) if line >= 0 else None
    gpu = Gpu(name=found.group(1).strip(), compute_capability=cc.group(1) if cc else None)
    return HostFacts(gpus=[gpu])


def detect_unsloth(text: str) -> bool:
    return bool(parse_unsloth(text).gpus)


FORMATS = [Format("Unsloth banner", detect_unsloth, parse_unsloth)]

# No probe: printed by Unsloth when it loads a model.
PROBES: list[Probe] = []
