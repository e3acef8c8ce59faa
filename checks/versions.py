"""Version normalisers: driver versions, CUDA versions and kernel releases as comparable values.

Everything compares through packaging.version.Version. Inputs that are not versions give None,
never an exception: an odd string is an unknown version. A version is looked for in the first
HEAD characters of its text only, so a huge value costs no more than a short one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

HEAD = 1024

# ASCII digits only: \d also matches Arabic-Indic or fullwidth digits, which Version() refuses.
_DRIVER = re.compile(r"(\d{2,3})\.(\d{1,3})(?:\.(\d{1,3}))?", re.ASCII)
_CUDA = re.compile(r"(\d{1,2})\.(\d{1,2})(?:\.(\d{1,3}))?", re.ASCII)
_KERNEL = re.compile(
    r"(\d{1,6})\.(\d{1,6})(?!\d)(?:\.(\d{1,6})(?!\d))?(?:[-.](\d{1,9})(?!\d))?(.*)", re.ASCII
)
_TORCH_CUDA = re.compile(r"\+cu(\d{2,3})\b", re.ASCII)


class DriverVersion(Version):
    """A driver version that compares as a Version and prints as NVIDIA writes it.

    Leading zeros in a component do not change its order (580.65.06 == 580.65.6), but str()
    keeps them: 580.65.06, never 580.65.6.
    """

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text

    def __str__(self) -> str:
        return getattr(self, "text", None) or super().__str__()

    def __reduce__(self) -> tuple[type[DriverVersion], tuple[str]]:
        return DriverVersion, (str(self),)


def driver(text: str | None) -> DriverVersion | None:
    """An NVIDIA driver version ("580.65.06", "570.26", "R570 570.124.04") as a DriverVersion."""
    if not text:
        return None
    match = _DRIVER.search(text, 0, HEAD)
    return DriverVersion(match.group(0)) if match is not None else None


def branch(text: str | None) -> int | None:
    """The driver branch (the major number): 580 for 580.65.06."""
    version = driver(text)
    return version.major if version is not None else None


def cuda(text: str | None) -> Version | None:
    """A CUDA version ("12.8", "12.8.1", "V12.6.20", "cuda>=12.4", "12080") as a Version."""
    if not text:
        return None
    value = text[:HEAD].strip()
    if value.isascii() and value.isdigit() and len(value) in (4, 5):
        # The driver API's integer form: 12080 -> 12.8, 11040 -> 11.4.
        number = int(value)
        return Version(f"{number // 1000}.{(number % 1000) // 10}")
    match = _CUDA.search(value)
    if match is None:
        return None
    return Version(".".join(part for part in match.groups() if part is not None))


def release(text: str | None) -> Version | None:
    """The major.minor of a CUDA version: 12.8.1 -> 12.8."""
    version = cuda(text)
    return Version(f"{version.major}.{version.minor}") if version is not None else None


def torch_cuda(version: str | None) -> Version | None:
    """The CUDA a PyTorch wheel was built for, from its local version: 2.6.0+cu126 -> 12.6."""
    if not version:
        return None
    match = _TORCH_CUDA.search(version, 0, HEAD)
    if match is None:
        return None
    digits = match.group(1)
    return Version(f"{digits[:-1]}.{digits[-1]}")


def parse(text: str | None) -> Version | None:
    """Any PEP 440 version, or None."""
    if not text or len(text) > HEAD:
        return None
    try:
        return Version(text.strip())
    except (InvalidVersion, ValueError):  # ValueError: a component of more than 4,300 digits
        return None


@dataclass(frozen=True)
class KernelRelease:
    """A Linux kernel release: 6.8.0-45-generic -> version 6.8.0, abi 45, flavour "generic".

    The flavour is everything after the ABI number: "fc41.x86_64", "microsoft-standard-WSL2"."""

    version: Version
    abi: int | None
    flavour: str | None

    @property
    def comparable(self) -> Version:
        """Version with the ABI number as a fourth component, for ordering builds of one base."""
        base = self.version.release + (0,) * (3 - len(self.version.release))
        return Version(".".join(str(n) for n in (*base[:3], self.abi or 0)))


def kernel(text: str | None) -> KernelRelease | None:
    """Parse a kernel release (uname -r): 6.8.0-45-generic, 6.14.6-200.fc41.x86_64, 5.15.0."""
    if not text:
        return None
    match = _KERNEL.match(text[:HEAD].strip())
    if match is None:
        return None
    major, minor, patch, abi, rest = match.groups()
    version = Version(f"{major}.{minor}.{patch or 0}")
    flavour = rest.lstrip("-.") or None
    return KernelRelease(version, int(abi) if abi else None, flavour or None)
