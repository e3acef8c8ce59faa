"""xFormers' reports: `python -m xformers.info` and its dispatcher's "your GPU has capability".

`python -m xformers.info` prints one `key: value` line per feature, the key padded to a column
(xformers/info.py: `"{:<40} {}".format(f"{name}:", status)`, wider in later releases), and the
current device's name and compute capability when PyTorch sees CUDA
(facebookresearch/xformers#1399):

    xFormers 0.0.35+42fc265.d20260623
    pytorch.version:                                   2.12.1+cu130
    pytorch.cuda:                                      available
    gpu.compute_capability:                            12.0
    gpu.name:                                          NVIDIA GeForce RTX 5070

When no attention operator fits, the NotImplementedError lists each operator's reasons, among
them the device's capability as a tuple (xformers/ops/fmha: `f"requires device with capability
{op} {cap} but your GPU has capability {device_capability} (too new)"`,
facebookresearch/xformers#1356):

    requires device with capability < (8, 0) but your GPU has capability (12, 0) (too new)

That names no GPU: one GPU of that capability is read, and only when the text shows a single
capability and no GPU name at all (a named GPU elsewhere in the text is most likely the same
one, and a nameless copy would count it twice). xformers.info's `build.cuda_version` is the
toolkit xFormers was built with, never the driver's CUDA, and is not read.
"""

from __future__ import annotations

import re

from checks.facts.model import Gpu, HostFacts
from checks.facts.parsers import Format
from checks.facts.probe import Probe

_INFO = re.compile(r"^[ \t]{0,8}pytorch\.cuda:[ \t]{1,80}(?:not )?available[ \t]*$", re.MULTILINE)
_INFO_NAME = re.compile(r"^[ \t]{0,8}gpu\.name:[ \t]{1,80}(\S[^\n]{0,120})$", re.MULTILINE)
_INFO_CC = re.compile(
    r"^[ \t]{0,8}gpu\.compute_capability:[ \t]{1,80}(\d{1,2}\.\d)[ \t]*$", re.MULTILINE
)
_DISPATCH = re.compile(
    r"requires device with capability [<>=]{1,2} \(\d{1,2}, \d\) "
    r"but your GPU has capability \((\d{1,2}), (\d)\) \(too (?:new|old)\)"
)
# Any GPU named elsewhere in the text: a brand word or a data-centre model ("A100", "L40S"), but
# not the dispatcher's own "bf16 is only supported on A100+ GPUs".
_NAMED = re.compile(
    r"\b(?:NVIDIA|GeForce|Quadro|Tesla|TITAN|RTX|GTX|Jetson)\b|\b[ABHL]\d{1,3}S?\b(?!\+)",
    re.IGNORECASE,
)


def _info(text: str) -> Gpu | None:
    """The device xformers.info names, or None."""
    if _INFO.search(text) is None:
        return None
    name = _INFO_NAME.search(text)
    cc = _INFO_CC.search(text)
    if name is None and cc is None:
        return None
    return Gpu(
        name=name.group(1).strip() if name else None,
        compute_capability=cc.group(1) if cc else None,
    )


def _dispatch(text: str) -> Gpu | None:
    """The nameless device of the dispatcher's reasons: one capability, no GPU named anywhere."""
    capabilities = {f"{m.group(1)}.{m.group(2)}" for m in _DISPATCH.finditer(text)}
    if len(capabilities) != 1 or _NAMED.search(text):
        return None
    return Gpu(compute_capability=capabilities.pop())


def parse_xformers(text: str) -> HostFacts:
    """The GPU xformers.info or the dispatcher's capability message shows."""
    gpu = _info(text) or _dispatch(text)
    return HostFacts(gpus=[gpu] if gpu else [])


def detect_xformers(text: str) -> bool:
    return bool(parse_xformers(text).gpus)


FORMATS = [Format("xformers", detect_xformers, parse_xformers)]

# No probe: xformers.info needs PyTorch and xFormers installed; pasted only.
PROBES: list[Probe] = []
