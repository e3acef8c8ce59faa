"""A GPU named in a sentence as the writer's own, when no tool's output names one.

People say which GPU they have in their own words (ggml-org/whisper.cpp#2857,
NVIDIA-developer-blog/code-samples#20, lmstudio-ai/lmstudio-bug-tracker#1186):

    ... to leverage my NVIDIA GeForce RTX 2050 GPU, but the application is not utilizing CUDA
    ... to test our GPU nodes, where each node has 4xP100 devices.
    GPU rtx 5060 Ti 16gb not detected by LM Studio, see screenshot.
    Seems nvitop could not well detect jetson orin nano platform.

Prose also names GPUs people want, compare or had, so the read is strict: the name follows "my"
("my GPU is a ..."; "our" may be a maintainer's), a count after "has" or "have" ("has 4xP100"),
or is the subject of "not detected" or the object of a tool that "could not detect" it
(XuehaiPan/nvitop#168; no one reports that a GPU they lack goes unseen); a sentence of the
writer's ("I", "we") says they are "using an NAME GPU" (swc-17/SparseDrive#67: "I am trying to
set up CUDA 11.6 with NVIDIA driver version 535 on Ubuntu 20.04, using an RTX 4060 Ti GPU"), or
the GPU is what a tool reports it as ("GPU reported as NVIDIA GB10", nv-morpheus/Morpheus#2328);
the catalogue knows it (a bare "RTX 5000" may be three boards); its sentence words no wish, plan,
comparison, alternative or past ("I want", "next", "or", "than", "old") outside the mention's own
words (NVML's "Not Supported" is no wish); and every such mention names one model. It is a
fallback: a tool's list of GPUs, anywhere in the text, wins.
"""

from __future__ import annotations

import re

from checks.facts import gpus
from checks.facts.model import Gpu, HostFacts
from checks.facts.parsers import Format
from checks.facts.probe import Probe

# A GPU's name as people type it: NVIDIA's words, then a consumer series and number ("RTX 2050",
# "rtx3090", "GTX 1060 Ti") or a data-center or workstation model in NVIDIA's own case ("P100",
# "L40S", "RTX A6000"), and a laptop's suffix.
_NAME = (
    r"(?:(?:NVIDIA|GeForce|Tesla|Quadro)[ ]){0,3}"
    r"(?:(?:RTX|GTX|GTS|GT|MX)[ -]?\d{3,4}(?:[ ]?(?:Ti|SUPER))?"
    r"|RTX[ ](?-i:A|PRO[ ])\d{3,4}|TITAN[ ](?:RTX|Xp|X|V)"
    r"|(?-i:GB\d{2,3}|GH200|[ABHKLPTV]\d{1,3}S?)"
    r"|Jetson[ ](?:AGX[ ])?(?:Orin|Xavier|Thor|Nano|TX[12])(?:[ ](?:Nano|NX))?)"
    r"(?:[ ](?:Laptop[ ]GPU|Laptop|Mobile))?(?![\w-])"
)
_COUNT = r"(?:(\d{1,2})[ ]?[x\u00d7][ ]?)"
_MINE = re.compile(
    r"\bmy[ ]{1,4}(?:(?:GPU|graphics[ ]card|video[ ]card|card)[ ]{1,4}is[ ]{1,4}(?:an?[ ])?)?"
    rf"{_COUNT}?({_NAME})",
    re.IGNORECASE,
)
_HAS = re.compile(rf"\b(?:has|have)[ ]{{1,4}}{_COUNT}({_NAME})", re.IGNORECASE)
_UNSEEN = re.compile(
    rf"(?<![\w-])()({_NAME})(?:[ ]{{1,4}}\d{{1,3}}[ ]?GB)?[ ]{{1,4}}(?:(?:is|was)[ ]{{1,4}})?"
    r"not[ ]{1,4}(?:being[ ]{1,4})?(?:detected|recogni[sz]ed|found|used|utili[sz]ed)\b",
    re.IGNORECASE,
)
# A tool that fails to see the GPU: "could not (well) detect NAME", "can't detect my NAME".
_UNDETECTED = re.compile(
    r"\b(?:can(?:not|'t|[ ]not)|could(?:n't|[ ]not)|does(?:n't|[ ]not)|did(?:n't|[ ]not)"
    r"|fails?[ ]to)[ ]{1,4}(?:[a-z]{2,12}[ ]{1,4})?(?:detect|recogni[sz]e)[ ]{1,4}"
    rf"(?:(?:my|the|our)[ ]{{1,4}})?()({_NAME})",
    re.IGNORECASE,
)
# "I am ... using an RTX 4060 Ti GPU": the word GPU after the name, in a sentence of the writer's.
_USING = re.compile(rf"\busing[ ]{{1,4}}an?[ ]{{1,4}}()({_NAME})[ ]{{1,4}}GPU\b", re.IGNORECASE)
_FIRST_PERSON = re.compile(r"\b(?:I|I'm|I've|[Ww]e|[Ww]e're)\b")
# What a tool reports the GPU as: "GPU reported as NVIDIA GB10".
_REPORTED = re.compile(
    r"\bGPUs?[ ]{1,4}(?:(?:is|was)[ ]{1,4})?(?:reported|detected|identified|recogni[sz]ed|listed"
    rf"|shown)[ ]{{1,4}}as[ ]{{1,4}}(?:an?[ ]{{1,4}})?()({_NAME})",
    re.IGNORECASE,
)
_WISH = re.compile(
    r"\b(?:wants?|wanted|wish|buy|buying|purchas\w*|plan\w*|consider\w*|upgrad\w*|switch\w*"
    r"|replac\w*|next|future|new|will|would|could|if|or|vs|versus|than|compar\w*|recommend\w*"
    r"|requir\w*|needs?|minimum|(?<!not[ ])supported|supports|like|such as|e\.g|for example"
    r"|similar|instead|friend\w*|colleague\w*|rent\w*|cloud|old|previous|former|used to"
    r"|borrow\w*)\b",
    re.IGNORECASE,
)
_STOPS = ("\n", ". ", "? ", "! ")
SENTENCE_REACH = 400  # characters looked at on each side of a mention for its sentence's ends
MAX_COUNT = 16


def _sentence(text: str, start: int, end: int) -> str:
    """The sentence around text[start:end], looked for within SENTENCE_REACH characters."""
    low = max(0, start - SENTENCE_REACH)
    starts = [found + len(stop) for stop in _STOPS if (found := text.rfind(stop, low, start)) >= 0]
    high = min(len(text), end + SENTENCE_REACH)
    ends = [found for stop in _STOPS if (found := text.find(stop, end, high)) >= 0]
    return text[max(starts, default=low) : min(ends, default=high)]


def _around(text: str, start: int, end: int) -> str:
    """The sentence around text[start:end] without that mention's own words."""
    sentence = _sentence(text, start, end)
    return sentence.replace(text[start:end], " ", 1)


def _mentions(text: str) -> list[tuple[int, str]]:
    """(count, name) of each wish-free mention the catalogue knows, in order."""
    found: list[tuple[int, int, str]] = []
    for pattern in (_MINE, _HAS, _UNSEEN, _UNDETECTED, _USING, _REPORTED):
        for match in pattern.finditer(text):
            name = match.group(2)
            if gpus.lookup(name) is None or _WISH.search(_around(text, *match.span())):
                continue
            if pattern is _USING and not _FIRST_PERSON.search(_sentence(text, *match.span())):
                continue
            found.append((match.start(), int(match.group(1) or 1), name))
    return [(count, name) for _, count, name in sorted(found)]


def parse_gpu_prose(text: str) -> HostFacts:
    """The GPUs the writer says are theirs, when every mention names one model."""
    mentions = _mentions(text)
    models = {model.name for _, name in mentions if (model := gpus.lookup(name)) is not None}
    if len(models) != 1:
        return HostFacts()
    count, name = mentions[0]
    return HostFacts(gpus=[Gpu(name=name) for _ in range(count)] if count <= MAX_COUNT else [])


def detect_gpu_prose(text: str) -> bool:
    return bool(parse_gpu_prose(text).gpus)


FORMATS = [Format("GPU in prose", detect_gpu_prose, parse_gpu_prose, fallback=True)]

# No probe: written by people, not printed by a tool.
PROBES: list[Probe] = []
