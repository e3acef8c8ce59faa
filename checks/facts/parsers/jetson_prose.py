"""A Jetson board and its JetPack named together in a sentence.

People name their Jetson by its board and JetPack in one breath (rbonghi/jetson_stats#608, #504):

    jetson-stats (or any of jtop utils) does not run on Orin Jetpack 5.1
    I am running jetpack 5.1.3 on Orin Nano.
    The Orin Nano is running Ubuntu 20.04 with Jetpack 5.1.2 (r35.4.1 L4T).

The read is strict: the board's words touch the JetPack ("on BOARD [with] JetPack X.Y", "JetPack
X.Y on BOARD") or the board is the subject that "is running" it, after an OS's name and version
at most (ollama/ollama#1979, whose bracket right after the JetPack gives its L4T release), the
sentence words no wish, plan, change or comparison ("upgrade", "should",
"supports", "or"), and every such mention names one board and one JetPack. A Jetson's GPU is its
module's, so the board is read as a GPU named as written ("Orin"); it is a fallback: a tool's
list of GPUs, anywhere in the text, wins. A template's placeholder ("Jetpack: [e.g. 4.3]") names
no board and is never read.
"""

from __future__ import annotations

import re

from checks.facts.model import Gpu, HostFacts
from checks.facts.parsers import Format
from checks.facts.probe import Probe

_BOARD = (
    r"(?:NVIDIA[ ])?(?:Jetson[ ])?(?:AGX[ ])?(?:Orin|Xavier|Thor)(?:[ ](?:Nano|NX))?(?:[ ]Super)?"
    r"|(?:NVIDIA[ ])?Jetson[ ](?:Nano|TX1|TX2)"
)
_ARTICLE = r"(?:(?:an?|the|my|our)[ ]{1,4})?"
_JETPACK = r"JetPack[ ]{1,4}(?:version[ ]{1,4})?(\d\.\d(?:\.\d)?)(?!\w|\.\d)"
# "on Orin Jetpack 5.1", "on Orin with Jetpack 5.1": (board, JetPack).
_BOARD_FIRST = re.compile(
    rf"\bon[ ]{{1,4}}{_ARTICLE}({_BOARD})[ ]{{1,4}}(?:with[ ]{{1,4}})?{_JETPACK}", re.IGNORECASE
)
# "The Orin Nano is running Ubuntu 20.04 with Jetpack 5.1.2 (r35.4.1 L4T)": (board, JetPack, L4T).
_BOARD_RUNS = re.compile(
    rf"\b({_BOARD})[ ]{{1,4}}(?:is|'s)[ ]{{1,4}}running[ ]{{1,4}}"
    rf"(?:(?:[\w.-]{{1,20}}[ ]{{1,4}}){{1,3}}with[ ]{{1,4}})?{_JETPACK}"
    r"(?:[ ]{1,4}\((?:r?(\d{2}\.\d{1,2}\.\d{1,2})[ ]L4T|L4T[ ]r?(\d{2}\.\d{1,2}\.\d{1,2}))\))?",
    re.IGNORECASE,
)
# "running jetpack 5.1.3 on Orin Nano": (JetPack, board).
_JETPACK_FIRST = re.compile(
    rf"\b{_JETPACK}[ ]{{1,4}}on[ ]{{1,4}}{_ARTICLE}({_BOARD})\b", re.IGNORECASE
)
_WISH = re.compile(
    r"\b(?:wants?|wish|plan\w*|will|would|should|could|upgrad\w*|updat\w*|downgrad\w*|flash\w*"
    r"|switch\w*|install\w*|requir\w*|needs?|minimum|supports?|supported|recommend\w*|or|vs"
    r"|than|compar\w*|instead|next|future|new|old|previous|e\.g|for example|like|if)\b",
    re.IGNORECASE,
)
_STOPS = ("\n", ". ", "? ", "! ")
_ASIDE = re.compile(r"\([^()\n]{0,200}\)")
SENTENCE_REACH = 300  # characters looked at on each side of a mention for its sentence's ends


def _sentence(text: str, start: int, end: int) -> str:
    """The sentence around text[start:end], without the mention's own words and without the
    asides in brackets before it, which are about its subject ("jetson-stats (or any of jtop
    utils) does not run on Orin Jetpack 5.1")."""
    low = max(0, start - SENTENCE_REACH)
    starts = [found + len(stop) for stop in _STOPS if (found := text.rfind(stop, low, start)) >= 0]
    high = min(len(text), end + SENTENCE_REACH)
    ends = [found for stop in _STOPS if (found := text.find(stop, end, high)) >= 0]
    head = _ASIDE.sub(" ", text[max(starts, default=low) : start])
    return head + " " + text[end : min(ends, default=high)]


def _mentions(text: str) -> list[tuple[str, str, str | None]]:
    """(board, JetPack, L4T or None) of each wish-free mention, in order."""
    found: list[tuple[int, str, str, str | None]] = []
    for pattern in (_BOARD_FIRST, _JETPACK_FIRST, _BOARD_RUNS):
        for match in pattern.finditer(text):
            if _WISH.search(_sentence(text, *match.span())):
                continue
            first, second = match.group(1), match.group(2)
            board, jetpack = (second, first) if pattern is _JETPACK_FIRST else (first, second)
            l4t = (match.group(3) or match.group(4)) if pattern is _BOARD_RUNS else None
            found.append((match.start(), board, jetpack, l4t))
    return [(board, jetpack, l4t) for _, board, jetpack, l4t in sorted(found)]


def parse_jetson_prose(text: str) -> HostFacts:
    """The board as a GPU and its JetPack (and L4T where a mention gives it), when every mention
    names the same pair and no two L4T releases."""
    mentions = _mentions(text)
    boards = {" ".join(board.lower().split()) for board, _, _ in mentions}
    jetpacks = {jetpack for _, jetpack, _ in mentions}
    l4ts = {l4t for _, _, l4t in mentions if l4t}
    if len(boards) != 1 or len(jetpacks) != 1 or len(l4ts) > 1:
        return HostFacts()
    facts = HostFacts(gpus=[Gpu(name=mentions[0][0])])
    facts.system.jetpack_release = jetpacks.pop()
    facts.system.l4t_release = l4ts.pop() if l4ts else None
    return facts


def detect_jetson_prose(text: str) -> bool:
    return bool(parse_jetson_prose(text).gpus)


FORMATS = [Format("Jetson in prose", detect_jetson_prose, parse_jetson_prose, fallback=True)]

# No probe: written by people, not printed by a tool.
PROBES: list[Probe] = []
