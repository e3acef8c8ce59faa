"""A driver version named in a sentence or a bullet: "driver 570.124.04", "NVIDIA drivers 570.144".

People state their driver in their own words (NVIDIA/TensorRT-LLM#3347, AUTOMATIC1111/
stable-diffusion-webui#16972, mudler/LocalAI#4571, lmstudio-ai/lmstudio-bug-tracker#1186,
NVIDIA/libnvidia-container#241):

    Running cuda-toolkit-12.8, driver 570.124.04, open.
    - NVIDIA drivers 570.144
    nVidia v550.142
    Driver version 581.57 . GPU is detected in Windows
    Transcoding is not working with driver version `550.54.14`
    Nvidia Driver: 381.22 (Ubuntu 16)
    Nvdia driver version- 525.60.11

Prose also names drivers people need, had, removed or will install ("requires driver 570.86 or
later", "upgraded from 550.54 to 570.124", "the latest driver is 575.64"), so the read is strict:
the word driver(s), driver version (each maybe with a ":", "-" or "=" after it, the one fact of
a lone line: Syllo/nvtop#186, nanopool/ewbf-miner#7) or NVIDIA right before an NNN.NN[.NN]
version, the version right before driver(s) ("Install 550.100 drivers"), or "driver is [version]"
(NVIDIA-developer-blog/code-samples#20: "The nvidia driver is version 418.40.04"), no wording of
a requirement, a change, a removal or an install still to come on that line (a step that says it
"Installed ... NVIDIA driver version 571.96" did it, ggml-org/whisper.cpp#2857), and exactly one
driver-shaped version in the whole text (any other NNN.NN[.NN] number, anywhere, and nothing is
read; one inside a file name, "cuda_11.3.1_465.19.01_linux.run", is not driver-shaped).

NVML's "Not Supported" is no wish; an example ("for example", "e.g.", "580.142 (example; attach
your nvidia-smi output)", nv-morpheus/Morpheus#2328) is one. Where the text holds no driver
version at all, "driver version NNN" names the branch alone (swc-17/SparseDrive#67: "with NVIDIA
driver version 535 on Ubuntu 20.04"), when no other number a branch may be follows "driver" or
"NVIDIA" anywhere, and its sentence is the writer's ("I", "my", "we") and words no wish ("after
installation" is done).

An install is a step done, not a plan, in the numbered steps someone took to reproduce a problem,
the list right under "Steps to reproduce", "Repro Steps" or "the steps I followed"
(NVIDIA/nvidia-docker#1171: "1.disable nouveau and install nvidia driver 440.44";
microsoft/WSL#7056: "1. install cuda on wsl driver (geforce, driver version 470.76)"); the same
words in a list of advice stay a plan. A false driver is worse than none.
"""

from __future__ import annotations

import re

from checks.facts.model import HostFacts
from checks.facts.parsers import Format
from checks.facts.probe import Probe

_VERSION = r"[3-9]\d{2}\.\d{2,3}(?:\.\d{2,3})?"
# "driver 570.124.04", "NVIDIA drivers 570.144", "driver is version 418.40.04", or the version
# before the word: "Install 550.100 drivers" (hyprwm/Hyprland#7016).
_NAMED = re.compile(
    r"(?<![\w.-])(?:(?:[Dd]rivers?(?:[ \t][Vv]ersion)?(?:[ \t]is(?:[ \t][Vv]ersion)?)?"
    rf"(?:[ \t]?[:=-])?|NVIDIA|[Nn][Vv]idia)[ \t]`?v?(?P<after>{_VERSION})(?!\w|\.\w)"
    rf"|(?P<before>{_VERSION})[ \t](?:NVIDIA[ \t]|[Nn]vidia[ \t])?[Dd]rivers?\b"
    r"(?![ \t]*[Vv]ersion))"  # not nvidia-smi's "NVIDIA-SMI 545.46  Driver Version: 546.80"
)
# Every driver-shaped number in the text, whatever names it; a sentence's full stop may end one.
_SHAPE = re.compile(rf"(?<![\w.])v?({_VERSION})(?!\w|\.\w)")
# Words that make the version one someone needs, had, removed or will install, not the one in use.
_INSTALL = r"\binstall(?!ed\b)"
_OTHER_WISHES = (
    r"requir|minimum|\bmin\b|at least|or (?:later|newer|higher|above|older|lower|below)|>="
    r"|\bupgrad|\bupdat"
    r"|\bdowngrad|instead of|\bfrom\b[^\n]{0,80}\bto\b|recommend|\bneeds?\b"
    r"|(?<!not )\bsupport|\bfix|\bbug\b|\bfor example\b|\(example\b|\be\.g\.|\bbroke"
    r"|\bwith\b[^\n]{0,40}\bor\b|\bshould\b|\blatest\b"
    r"|\bnewest\b|\b(?:un|de)-?install|\bremov|\bpurg|\brevert|\broll(?:ed|ing)? ?back"
)
_WISH = re.compile(f"{_INSTALL}|{_OTHER_WISHES}", re.IGNORECASE)
# In the steps someone took to reproduce a problem, "install driver N" is a step done, unless
# another line changes the driver after it ("3. Update the NVIDIA driver to a version newer than
# 576.33.", ggml-org/llama.cpp#23765).
_STEP_WISH = re.compile(_OTHER_WISHES, re.IGNORECASE)
_CHANGE = re.compile(
    r"\b(?:updat|upgrad|downgrad|re-?install|switch|revert|roll(?:ed|ing)? ?back)\w*\b"
    r"[^\n]{0,60}\bdrivers?\b|\bdrivers?\b[^\n]{0,60}\b(?:updat|upgrad|downgrad)",
    re.IGNORECASE,
)
_STEP = re.compile(r"[ \t]{0,4}\d{1,2}[.)]")
_REPRO = re.compile(
    r"\bto reproduce\b|\brepro(?:duction)? steps\b|\bsteps (?:I|we) (?:followed|took|did)\b",
    re.IGNORECASE,
)
_STEPS_BACK = 24  # lines from a step up to the words that open its list
# A branch alone: "with NVIDIA driver version 535 on Ubuntu 20.04" (swc-17/SparseDrive#67),
# "Nvidia driver (version 440) is already installed" (ci-for-research/self-hosted-runners#40).
_BRANCH = re.compile(r"(?<![\w.-])[Dd]river[ \t]\(?[Vv]ersion[ \t]([3-9]\d{2})(?![\w.+]|\.\d)")
# A number a branch may be within a few words after "driver" or "NVIDIA" ("the nvidia driver
# version 510 ... (the nvidia driver version is 515)", two machines in Tencent/TPAT#32).
_OTHER_BRANCH = re.compile(
    r"\b(?:driver|nvidia)\b[^\n\d]{0,40}(?<![\w.])([3-9]\d{2})(?![\w.])", re.IGNORECASE
)
# A branch is read only from the writer's own sentence ("I am ...", "when I run"): a maintainer's
# "Presently this is Nvidia driver version 510" (GoogleCloudPlatform/compute-gpu-installation#4)
# names what an installer puts on machines.
_FIRST_PERSON = re.compile(r"\b(?:I|I'm|I've|my|[Ww]e|[Ww]e're|our)\b")
# The wishes of a branch's sentence; a done installation is no plan ("after installation").
_BRANCH_WISH = re.compile(rf"\binstall(?!ed\b|ation\b)|{_OTHER_WISHES}", re.IGNORECASE)


def _line_start(text: str, pos: int) -> int:
    return text.rfind("\n", 0, pos) + 1


def _line(text: str, pos: int) -> str:
    start = _line_start(text, pos)
    end = text.find("\n", pos)
    return text[start : end if end >= 0 else len(text)]


def _repro_step(text: str, start: int) -> bool:
    """Whether the line at `start` is an item of a numbered list that follows, past other items,
    indented lines, blank lines and fences only, a line saying the steps reproduce a problem
    ("### Steps to reproduce", "Those are the steps I followed:")."""
    if _STEP.match(text, start) is None:
        return False
    for _ in range(_STEPS_BACK):
        if start == 0:
            return False
        above = _line_start(text, start - 1)
        line, start = text[above : start - 1], above
        if _REPRO.search(line) is not None:
            return True
        bare = line.strip()
        prose = bare and not bare.startswith("```") and not line[0].isspace()
        if prose and _STEP.match(line) is None:
            return False
    return False


def _branch(text: str) -> str | None:
    """The branch "driver version NNN" names, where the text holds no driver version and no other
    number a branch may be, and that sentence is the writer's and words no wish, plan or change."""
    named = list(_BRANCH.finditer(text))
    branches = {m.group(1) for m in named} | set(_OTHER_BRANCH.findall(text))
    if not named or len(branches) != 1 or _SHAPE.search(text):
        return None
    sentence = _sentence(text, named[0].start())
    mine = _FIRST_PERSON.search(sentence) is not None
    return named[0].group(1) if mine and _BRANCH_WISH.search(sentence) is None else None


def _sentence(text: str, pos: int) -> str:
    """The sentence of the line at `pos` that holds it: between full stops (". ")."""
    start = _line_start(text, pos)
    line = _line(text, pos)
    begin = line.rfind(". ", 0, pos - start)
    end = line.find(". ", pos - start)
    return line[begin + 1 if begin >= 0 else 0 : end if end >= 0 else len(line)]


def parse_driver_prose(text: str) -> HostFacts:
    """The driver a sentence names, when the guards hold; else nothing."""
    facts = HostFacts()
    named = _NAMED.search(text)
    if named is None:
        facts.driver.version = _branch(text)
        return facts
    version = named.group("after") or named.group("before")
    if {m.group(1) for m in _SHAPE.finditer(text)} != {version}:
        return facts
    start = _line_start(text, named.start())
    line = _line(text, named.start())
    if _repro_step(text, start):
        rest = text[:start] + text[start + len(line) :]
        done = _STEP_WISH.search(line) is None and _CHANGE.search(rest) is None
    else:
        done = _WISH.search(line) is None
    facts.driver.version = version if done else None
    return facts


def detect_driver_prose(text: str) -> bool:
    return parse_driver_prose(text).driver.version is not None


FORMATS = [Format("driver in prose", detect_driver_prose, parse_driver_prose)]

# No probe: written by people, not printed by a tool.
PROBES: list[Probe] = []
