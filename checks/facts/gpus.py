"""The GPU catalogue: compute capability, architecture and class from a GPU's name.

The data lives in checks/matrix/tables/gpus.toml; entries are tried in order, the first match wins.
"""

from __future__ import annotations

import copy
import functools
import re
from dataclasses import dataclass
from typing import Any

from checks import packaged
from checks.facts.model import HostFacts

BRAND_CLASSES = ("consumer", "workstation", "datacenter", "embedded")
# The words an NVIDIA GPU's name starts with as tools print it, a regex group for parsers that
# find names in free text; each adds its own boundary ("NVIDIA-Nemotron" is a model, not a GPU).
NAME_START = r"(?:NVIDIA|GeForce|Quadro|Tesla|TITAN)"
# The first, "Tesla" (compute capability 1.x), shares its word with a product brand: it is never
# read from a tool's architecture field, only set by the catalogue.
ARCHITECTURES = (
    "Tesla",
    "Fermi",
    "Kepler",
    "Maxwell",
    "Pascal",
    "Volta",
    "Turing",
    "Ampere",
    "Ada",
    "Hopper",
    "Blackwell",
    "Rubin",
)

# Product brands as NVML and nvidia-smi name them, lower-cased, and the class each implies.
_BRANDS = {
    "geforce": "consumer",
    "geforce rtx": "consumer",
    "titan": "consumer",
    "titan rtx": "consumer",
    "quadro": "workstation",
    "quadro rtx": "workstation",
    "nvidia rtx": "workstation",
    "nvs": "workstation",
    "tesla": "datacenter",
    "grid": "datacenter",
}

# Words in a name that say the class when the catalogue does not know the model.
_NAME_HINTS = (
    (re.compile(r"\bjetson\b|\borin\b|\bthor\b", re.I), "embedded"),
    (re.compile(r"\bgeforce\b|\btitan\b", re.I), "consumer"),
    (re.compile(r"\bquadro\b|\bRTX A\d|\bRTX PRO\b|\bAda Generation\b", re.I), "workstation"),
    (re.compile(r"\btesla\b", re.I), "datacenter"),
)


@dataclass(frozen=True)
class GpuModel:
    """One catalogue entry."""

    name: str
    patterns: tuple[str, ...]
    compute_capability: str
    architecture: str
    brand_class: str
    memory_gib: int | None = None

    def matches(self, gpu_name: str) -> bool:
        """Whether any of the entry's patterns occurs in `gpu_name` (case-insensitive)."""
        return any(re.search(p, gpu_name, re.IGNORECASE) for p in self.patterns)


@functools.cache
def _data() -> dict[str, Any]:
    return packaged.read_toml("checks.matrix", "tables", "gpus.toml")


@functools.cache
def catalogue() -> tuple[GpuModel, ...]:
    """Every entry of the catalogue, in match order."""
    return tuple(
        GpuModel(
            name=entry["name"],
            patterns=tuple(entry["patterns"]),
            compute_capability=entry["compute_capability"],
            architecture=entry["architecture"],
            brand_class=entry["brand_class"],
            memory_gib=entry.get("memory_gib"),
        )
        for entry in _data().get("gpu", [])
    )


def citations() -> list[str]:
    """Where the catalogue's facts come from."""
    return list(_data().get("citations", []))


# A series and its number run together as people type them ("rtx3090", "GTX1080", "RTX 3060Ti").
_JOINED = re.compile(r"\b(RTX|GTX|GTS|GT|MX)[ -]?(\d{3,4})(?:[ ]?(Ti|SUPER))?\b", re.IGNORECASE)


def _spaced(match: re.Match[str]) -> str:
    suffix = f" {match.group(3)}" if match.group(3) else ""
    return f"{match.group(1)} {match.group(2)}{suffix}"


_MARKS = str.maketrans({"\u2122": " ", "\u00ae": " "})  # ™ and ®, as product pages print them


def lookup(name: str | None) -> GpuModel | None:
    """The first catalogue entry matching a GPU name, or None; a series run into its number
    ("rtx3090", "RTX 3060Ti") reads as NVIDIA spells it, and trademark signs are left out
    ("GeForce RTX\u2122 3080")."""
    if not name or not name.strip():
        return None
    text = _JOINED.sub(_spaced, " ".join(name.translate(_MARKS).split()))
    return next((model for model in catalogue() if model.matches(text)), None)


# A name nvidia-smi's table cut inside a GeForce or Quadro RTX model number, one digit short of
# its four ("GeForce RTX 208..."): NVIDIA's numbers fix the generation in their first digits.
_CUT_NUMBER = re.compile(r"(?:NVIDIA )?(?:GeForce (?:RTX|GTX|GT)|Quadro RTX) \d{3}")
# What may follow a model number in a GPU's name, as the driver names the boards.
_CUT_TAILS = (
    "",
    " Ti",
    " SUPER",
    " Ti SUPER",
    " D",
    " D v2",
    " Laptop GPU",
    " Ti Laptop GPU",
    " with Max-Q Design",
    " Ti with Max-Q Design",
    "M",
)


# A name cut right after the words of the RTX PRO family ("NVIDIA RTX PRO ...", canonical/
# inference-snaps#89), and the models and names that may follow them.
_CUT_FAMILY = re.compile(r"(?:NVIDIA )?RTX PRO")
_FAMILY_NUMBERS = tuple(f" {digit}{zeros}" for digit in "123456789" for zeros in ("00", "000"))
_FAMILY_TAILS = (
    "",
    " Blackwell",
    " Blackwell Server Edition",
    " Blackwell Max-Q Workstation Edition",
    " Blackwell Generation Laptop GPU",
)


@functools.cache
def cut_capability(start: str) -> str | None:
    """The compute capability of a GPU whose name nvidia-smi cut short, where every catalogue
    model the cut number can be has the same one ("GeForce RTX 208" is 7.5: RTX 2080, 2080 SUPER
    and 2080 Ti; "NVIDIA RTX PRO" is 12.0, every RTX PRO being a Blackwell board); None where they
    differ or the cut is elsewhere ("NVIDIA GeForce")."""
    start = " ".join(start.split())
    if _CUT_FAMILY.fullmatch(start) is not None:
        names = [f"{start}{number}{tail}" for number in _FAMILY_NUMBERS for tail in _FAMILY_TAILS]
    elif _CUT_NUMBER.fullmatch(start) is not None:
        names = [f"{start}{digit}{tail}" for digit in "0123456789" for tail in _CUT_TAILS]
    else:
        return None
    found = {lookup(name) for name in names}
    capabilities = {model.compute_capability for model in found if model is not None}
    return capabilities.pop() if len(capabilities) == 1 else None


# Models NVIDIA tells apart by their memory, the size part of the name as the driver and pci.ids
# give it ("GA107 [GeForce RTX 3050 6GB]", "GP106 [GeForce GTX 1060 3GB]", "NVIDIA T1000 8GB").
_MEMORY_NAMED = re.compile(
    r"\b(?:GTX 1050 3|GTX 1060 [356]|RTX 2060 12|RTX 3050 [468]|RTX 3060 (?:8|12)|RTX 3080 12"
    r"|RTX 3080 Ti 20|RTX 4060 Ti 16|RTX A2000 (?:8|12)|T1000 8|T400 4)[ ]?GB",
    re.IGNORECASE,
)


def memory_named(text: str) -> bool:
    """Whether `text` ends in the memory size of a model NVIDIA names with it ("RTX 3050 6GB")."""
    spaced = _JOINED.sub(_spaced, " ".join(text.split()))
    return any(m.end() == len(spaced) for m in _MEMORY_NAMED.finditer(spaced))


_NVIDIA_WORD = re.compile(rf"{NAME_START}\b")


def is_nvidia(name: str) -> bool:
    """Whether a name a tool printed is an NVIDIA GPU's: it starts with one of NVIDIA's words, or
    the catalogue knows it (for tools that also list AMD and Intel GPUs)."""
    return _NVIDIA_WORD.match(name) is not None or lookup(name) is not None


def brand_class(brand: str | None, name: str | None) -> str | None:
    """The GPU's class from the catalogue, else its product brand, else words in its name."""
    model = lookup(name)
    if model is not None:
        return model.brand_class
    if brand:
        by_brand = _BRANDS.get(" ".join(brand.lower().split()))
        if by_brand is not None:
            return by_brand
    if name:
        for pattern, klass in _NAME_HINTS:
            if pattern.search(name):
                return klass
    return None


def normalise_architecture(name: str | None) -> str | None:
    """An architecture name as used here: "Ada Lovelace" -> "Ada"; unknown words give None."""
    if not name:
        return None
    word = name.strip().split(" ")[0].lower()
    return next((arch for arch in ARCHITECTURES[1:] if arch.lower() == word), None)


def enrich(facts: HostFacts) -> HostFacts:
    """A copy of `facts` with each GPU's compute capability, architecture and class filled in.

    Known values are never overwritten.
    """
    out = copy.deepcopy(facts)
    for gpu in out.gpus:
        model = lookup(gpu.name)
        if model is not None:
            gpu.compute_capability = gpu.compute_capability or model.compute_capability
            gpu.architecture = gpu.architecture or model.architecture
        if gpu.brand_class is None:
            gpu.brand_class = brand_class(gpu.brand, gpu.name)
    return out
