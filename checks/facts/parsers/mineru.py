"""MinerU's log: the compute capability of the GPU its vLLM backend runs on.

MinerU's vLLM backend logs the capability torch reports for the current CUDA device when it
decides on its custom logits processors (mineru/backend/vlm/utils.py,
enable_custom_logits_processors; vllm-project/vllm#32575):

    ... mineru.backend.vlm.utils:enable_custom_logits_processors:46 - compute_capability: 12.1
    >= 8.0 and vllm version: 0.14.0rc1.dev539+g11b6af528 >= 0.10.1, enable custom_logits_processors

(one line). Only its three wordings are read ("X.Y >= 8.0 and vllm version:", "X.Y < 8.0 and vllm
version:", "X.Y < 8.0, but vllm version:"), as one GPU with no name. On an Ascend NPU MinerU logs
a made-up "8.0" in the same words, so 8.0 is never read. It is a fallback: a tool's list of GPUs,
anywhere in the text, wins.
"""

from __future__ import annotations

import re

from checks.facts.model import Gpu, HostFacts
from checks.facts.parsers import Format
from checks.facts.probe import Probe

_LINE = re.compile(
    r"\bcompute_capability: (\d{1,2}\.\d) (?:>= 8\.0 and|< 8\.0 and|< 8\.0, but) vllm version: "
)
_NPU = "8.0"  # what MinerU logs for an Ascend NPU


def parse_mineru(text: str) -> HostFacts:
    """One unnamed GPU of the capability MinerU logs, when every such line logs the same one."""
    found = {match.group(1) for match in _LINE.finditer(text)}
    if len(found) != 1 or _NPU in found:
        return HostFacts()
    return HostFacts(gpus=[Gpu(compute_capability=found.pop())])


def detect_mineru(text: str) -> bool:
    return bool(parse_mineru(text).gpus)


FORMATS = [Format("MinerU log", detect_mineru, parse_mineru, fallback=True)]

# No probe: read from a log, not run.
PROBES: list[Probe] = []
