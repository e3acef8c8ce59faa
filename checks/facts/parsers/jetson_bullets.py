"""A Jetson and its JetPack in a list of "Key: value" bullets, bold keys allowed.

Pull requests and reports say what they ran on in a short list (nvidia-cosmos/cosmos-reason2#45):

    ## Tested On

    - **Hardware:** Jetson AGX Orin 64GB
    - **JetPack:** 6.2 (L4T R36.4)
    - **CUDA:** 12.6

A JetPack key's value counts when it is a release number ("6.2", "5.1.2") alone or before an
aside; an L4T release given there ("R36.4.7") or a bare major ("6") is not read. A board key
(Hardware, Device, Platform, Target platform, Board, Module) counts where its value is one
Jetson's name and the list states the JetPack too: a Jetson's GPU is its module's, named as
written, memory included ("Jetson AGX Orin 64GB"). A value naming several boards ("Jetson AGX
Orin, Orin NX") names none. Where a tool's output in the text gives the L4T release
(/etc/nv_tegra_release, jetson-stats), the list is not read: a JetPack written by hand may not be
that release's (rbonghi/jetson_stats#791 writes JetPack 6.2.1, whose L4T is 36.4.4, beside
nv_tegra_release's 36.4.7). The board is a fallback: a tool's list of GPUs, anywhere in the
text, wins.
"""

from __future__ import annotations

import re

from checks.facts.model import Gpu, HostFacts
from checks.facts.parsers import Format, jetson
from checks.facts.probe import Probe

_KEY_LINE = re.compile(
    r"^[ \t]{0,4}(?:[-*+][ \t]{1,4})?(?:\*\*)?([A-Za-z][A-Za-z ]{1,30}?)(?:\*\*)?[ \t]{0,2}:"
    r"(?:\*\*)?[ \t]{1,4}([^\n]{1,200})$",
    re.MULTILINE,
)
_JETPACK_KEYS = {"jetpack", "jetpack version"}
_BOARD_KEYS = {"hardware", "device", "platform", "target platform", "board", "module"}
_RELEASE = re.compile(r"(\d{1,2}\.\d{1,2}(?:\.\d{1,2})?)(?:[ \t]{1,4}[(\[][^\n]*)?")
_JETSON = re.compile(r"(?:NVIDIA[ ])?Jetson[ ][A-Za-z0-9][\w -]{0,60}")
_ASIDE = re.compile(r"[ \t]{1,4}\(")
_SEVERAL = re.compile(r",|/|\+|\b(?:or|and)\b")
_TRIM = "*` \t"


def _entries(text: str) -> list[tuple[str, str]]:
    """(key, value) of each list line, the key lower-cased, markdown taken off the value."""
    return [
        (" ".join(m.group(1).lower().split()), m.group(2).strip(_TRIM))
        for m in _KEY_LINE.finditer(text)
    ]


def _board(value: str) -> str | None:
    """The one Jetson a board value names, cut before an aside in brackets."""
    aside = _ASIDE.search(value)
    name = value[: aside.start() if aside else None].strip(_TRIM)
    if _JETSON.fullmatch(name) is None or _SEVERAL.search(name):
        return None
    return name


def parse_jetson_bullets(text: str) -> HostFacts:
    """The JetPack release a JetPack bullet states and the Jetson a board bullet names, where no
    tool's output in the text names the L4T release."""
    facts = HostFacts()
    if jetson.parse_jetson_release(text).system.l4t_release is not None:
        return facts
    entries = _entries(text)
    releases = [
        found.group(1)
        for key, value in entries
        if key in _JETPACK_KEYS and (found := _RELEASE.fullmatch(value))
    ]
    boards = [board for key, value in entries if key in _BOARD_KEYS and (board := _board(value))]
    if releases:
        facts.system.jetpack_release = releases[0]
        facts.gpus = [Gpu(name=boards[0])] if boards else []
    return facts


def detect_jetson_bullets(text: str) -> bool:
    facts = parse_jetson_bullets(text)
    return bool(facts.gpus) or facts.system.jetpack_release is not None


FORMATS = [Format("Jetson bullets", detect_jetson_bullets, parse_jetson_bullets, fallback=True)]

# No probe: written by people, not printed by a tool.
PROBES: list[Probe] = []
