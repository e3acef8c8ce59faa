"""Jetson releases: /etc/nv_tegra_release and jetson-stats' `jetson_release` report.

/etc/nv_tegra_release's first line is "# R38 (release), REVISION: 2.0, GCID: ..., BOARD: generic,
EABI: aarch64, DATE: ...": Jetson Linux (L4T) 38.2.0 (release 38, revision 2.0). jetson-stats
prints "L4T: 36.4.3", and "Jetpack: 6.2" ("Jetpack: 6.0 DP", the developer preview, is kept
whole: it is not 6.0) or "Jetpack 6.0 [L4T 36.3.0]" when it knows the JetPack that L4T release
belongs to ("Jetpack missing!" or "NOTDETECTED" when it does not). JetsonHacks'
jetsonInfo.py prints " L4T 32.4.2 [ JetPack 4.4 ]" ("[ JetPack UNKNOWN ]" when it does not know).

jetson-stats also describes the board: its issue forms' "### Board" bullets and `jetson_release`'s
"Hardware:" bullets (rbonghi/jetson_stats#405, #586, #603):

     - Model: NVIDIA Orin Nano Developer Kit
     - Module: NVIDIA Jetson Orin Nano (Developer kit)
     - SoC: tegra23x
     - CUDA Arch BIN: 8.7

A Jetson's GPU is its module's integrated GPU, so a module the report names is a GPU with the
capability "CUDA Arch BIN" gives (the catalogue's where the report gives none). Where jetson-stats
does not know the module ("Module: **MISSING**", rbonghi/jetson_stats#476), the board's model
names it when that is an NVIDIA Jetson ("NVIDIA Jetson AGX Orin Developer Kit"); a carrier board
of another maker's name ("lanai-3636", rbonghi/jetson_stats#515) names none. The report counts
as jetson-stats' only beside a key no one else prints there (P-Number, SoC, CUDA Arch BIN), and
its GPU only where no tool's output lists one (nvidia-smi's "Orin (nvgpu)" is the same GPU).
"""

from __future__ import annotations

import re

from checks.facts.model import Gpu, HostFacts
from checks.facts.parsers import Format
from checks.facts.probe import Probe

_TEGRA_RELEASE = re.compile(
    r"^# R(\d{2,3}) \(release\), REVISION: (\d{1,3})\.(\d{1,3})(?![\d.])", re.MULTILINE
)
# jetson-stats: "- L4T: 38.2.0" (markdown report), " - L4T: 36.4.3" (jetson_release).
_L4T_LINE = re.compile(r"^[ \t]{0,4}(?:-[ \t])?L4T: (\d{2,3}\.\d{1,3}\.\d{1,3})[ \t]*$", re.M)
_JETPACK_LINE = re.compile(
    r"^[ \t]{0,4}(?:-[ \t])?Jetpack: (\d{1,2}\.\d{1,2}(?:\.\d{1,2})?(?: DP)?)[ \t]*$", re.M | re.I
)
# "Model: NVIDIA Jetson AGX Orin Developer Kit - Jetpack 6.0 [L4T 36.3.0]", and a test
# environment's "Jetpack Version : 4.4.1 [L4T 32.4.4]" (ethereum-mining/ethminer#2171).
_BOTH = re.compile(
    r"Jetpack(?: Version[ \t]{0,4}:)? (\d{1,2}\.\d{1,2}(?:\.\d{1,2})?)"
    r" \[L4T (\d{2,3}\.\d{1,3}\.\d{1,3})\]"
)
# jetsonInfo.py (jetsonhacks/jetsonUtilities): " L4T 32.4.2 [ JetPack UNKNOWN ]".
_JETSONINFO = re.compile(
    r"^[ \t]{0,4}L4T (\d{2,3}\.\d{1,3}\.\d{1,3}) \[ JetPack ([^\s\]]{1,20}) \][ \t]*$", re.M
)
_JETPACK = re.compile(r"\d{1,2}\.\d{1,2}(?:\.\d{1,2})?")


def parse_jetson_release(text: str) -> HostFacts:
    """The L4T release (nv_tegra_release first, then jetson-stats) and the JetPack it names."""
    facts = HostFacts()
    tegra = _TEGRA_RELEASE.search(text)
    both = _BOTH.search(text)
    l4t = _L4T_LINE.search(text) or _JETSONINFO.search(text)
    if tegra is not None:
        facts.system.l4t_release = ".".join(tegra.groups())
    elif both is not None:
        facts.system.l4t_release = both.group(2)
    elif l4t is not None:
        facts.system.l4t_release = l4t.group(1)
    jetpack = _JETPACK_LINE.search(text)
    if both is not None and both.group(2) == facts.system.l4t_release:
        facts.system.jetpack_release = both.group(1)
    elif jetpack is not None:
        facts.system.jetpack_release = jetpack.group(1)
    elif l4t is not None and l4t.re is _JETSONINFO:
        facts.system.jetpack_release = _jetsoninfo_jetpack(text, facts.system.l4t_release)
    return facts


def _jetsoninfo_jetpack(text: str, l4t: str | None) -> str | None:
    """The one JetPack jetsonInfo.py names for that L4T release; a run that did not know it ("[
    JetPack UNKNOWN ]", before a fix: jetsonhacks/jetsonUtilities#3) names none."""
    named = {
        m.group(2)
        for m in _JETSONINFO.finditer(text)
        if m.group(1) == l4t and _JETPACK.fullmatch(m.group(2))
    }
    return named.pop() if len(named) == 1 else None


def detect_jetson_release(text: str) -> bool:
    return any(p.search(text) for p in (_TEGRA_RELEASE, _BOTH, _L4T_LINE, _JETSONINFO))


# jetson-stats' board bullets: " - Module: NAME" (form), "- Module: NAME" (form, no indent),
# " - Model: NAME" (jetson_release); a value may be bold ("**MISSING**").
_BOARD_KEY = re.compile(
    r"^[ \t]{0,4}(?:-[ \t]{1,2})?(Model|Module|CUDA Arch BIN|SoC|P-Number):[ \t]{1,4}"
    r"([^\n]{1,200})$",
    re.MULTILINE,
)
_JTOP_KEYS = {"CUDA Arch BIN", "SoC", "P-Number"}
_JETSON_NAME = re.compile(r"(?:NVIDIA[ \t])?Jetson[ \t]\S")
_ARCH_BIN = re.compile(r"\d{1,2}\.\d")
# jetson_release's model line may carry the JetPack: "NAME - Jetpack 6.0 [L4T 36.3.0]".
_MODEL_JETPACK = re.compile(r"[ \t]+-[ \t]+Jetpack\b.*$", re.IGNORECASE)


def _board(text: str) -> dict[str, str]:
    """jetson-stats' board keys, each one's first value, markdown bold and blanks taken off."""
    found: dict[str, str] = {}
    for match in _BOARD_KEY.finditer(text):
        found.setdefault(match.group(1), match.group(2).strip().strip("*").strip())
    return found


def parse_jetson_board(text: str) -> HostFacts:
    """The Jetson's integrated GPU, named by the module (else the board's model) jetson-stats
    reports, with the capability it gives."""
    board = _board(text)
    if not _JTOP_KEYS & board.keys():
        return HostFacts()
    model = _MODEL_JETPACK.sub("", board.get("Model", ""))
    names = [board.get("Module", ""), model]
    name = next((n for n in names if _JETSON_NAME.match(n) and "MISSING" not in n), None)
    if name is None:
        return HostFacts()
    arch = board.get("CUDA Arch BIN", "")
    capability = arch if _ARCH_BIN.fullmatch(arch) else None
    return HostFacts(gpus=[Gpu(name=name, compute_capability=capability)])


def detect_jetson_board(text: str) -> bool:
    return bool(parse_jetson_board(text).gpus)


FORMATS = [
    Format("nv_tegra_release / jetson_release", detect_jetson_release, parse_jetson_release),
    Format("jetson-stats board", detect_jetson_board, parse_jetson_board, fallback=True),
]

# No probe yet: the checks have no rule that reads the L4T release.
PROBES: list[Probe] = []
