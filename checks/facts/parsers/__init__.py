"""Pure parsers from command output to HostFacts fragments, and the formats they recognise."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

from checks.facts.model import HostFacts


@dataclass(frozen=True)
class Format:
    """A kind of pasted or captured output: `detect` says whether text holds it, `parse` reads it.

    Text may hold several formats at once (an issue with a log and an nvidia-smi table): every
    format whose `detect` is true parses the text and the fragments merge. A `fallback` format
    (words people write, not a tool's output) is read last, and its GPUs count only where no other
    format named any. An `annotates` format (a fact written beside a GPU's name) is read after
    all others and adds no GPU: its GPUs only fill in what the GPUs the others read, of the same
    model, leave unknown.
    """

    name: str
    detect: Callable[[str], bool]
    parse: Callable[[str], HostFacts]
    fallback: bool = False
    annotates: bool = False


# When two sources disagree on a fact, the earlier one wins: the driver's own report first, then
# every other parser module in name order.
AUTHORITATIVE = ("nvidia_smi",)


def modules() -> list[ModuleType]:
    """Every parser module in this folder (one with PROBES or FORMATS), in merge order."""
    found = []
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        if hasattr(module, "PROBES") or hasattr(module, "FORMATS"):
            found.append(module)
    rank = {name: i for i, name in enumerate(AUTHORITATIVE)}
    return sorted(found, key=lambda m: (rank.get(_short(m), len(rank)), _short(m)))


def _short(module: ModuleType) -> str:
    return module.__name__.rsplit(".", 1)[-1]
