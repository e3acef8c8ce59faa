"""Pure parsers from command output to HostFacts fragments, and the formats they recognise."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from checks.facts.model import HostFacts


@dataclass(frozen=True)
class Format:
    """A kind of pasted or captured output: `detect` says whether text holds it, `parse` reads it.

    Text may hold several formats at once (an issue with a log and an nvidia-smi table): every
    format whose `detect` is true parses the text and the fragments merge.
    """

    name: str
    detect: Callable[[str], bool]
    parse: Callable[[str], HostFacts]
