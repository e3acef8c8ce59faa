"""Which GPU architectures a binary can run on, from the targets it was compiled for.

A real target (SASS) sm_XY runs on X.Y and newer minors of major X; PTX compute_XY is
JIT-compiled on any GPU of X.Y or newer. Arch-specific targets (120a) run on exactly that compute
capability; family targets (120f) on the same major from that minor up.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_ENTRY = re.compile(r"^(?:sm_|compute_)?(\d{2,3})([af]?)(?:-(real|virtual))?$")


@dataclass(frozen=True)
class Target:
    """One compiled target: compute capability, SASS or PTX, and its suffix ("", "a" or "f")."""

    major: int
    minor: int
    ptx: bool
    suffix: str = ""

    def runs_on(self, cc: tuple[int, int]) -> bool:
        if self.suffix == "a":
            return cc == (self.major, self.minor)
        if self.ptx and self.suffix == "":
            return cc >= (self.major, self.minor)
        return cc[0] == self.major and cc[1] >= self.minor

    def label(self) -> str:
        return f"{'compute' if self.ptx else 'sm'}_{self.major}{self.minor}{self.suffix}"


def cc_tuple(text: str | None) -> tuple[int, int] | None:
    """ "8.6" -> (8, 6); "12.0" -> (12, 0); anything else -> None."""
    if not text:
        return None
    match = re.fullmatch(r"\s*(\d{1,2})\.(\d)\s*", text)
    return (int(match.group(1)), int(match.group(2))) if match else None


def _split_number(digits: str) -> tuple[int, int]:
    return int(digits[:-1]), int(digits[-1])


def from_cmake(value: str | None) -> list[Target] | None:
    """CMAKE_CUDA_ARCHITECTURES ("86;89;120a-real"); None when native, all or unreadable."""
    if not value:
        return None
    targets: list[Target] = []
    for entry in re.split(r"[;,\s]+", value.strip()):
        if not entry:
            continue
        match = _ENTRY.match(entry.lower())
        if match is None:
            return None
        digits, suffix, kind = match.groups()
        major, minor = _split_number(digits)
        if kind != "virtual":
            targets.append(Target(major, minor, ptx=False, suffix=suffix))
        if kind != "real":
            targets.append(Target(major, minor, ptx=True, suffix=suffix))
    return targets or None


def from_system_info(archs: list[str] | None) -> list[Target] | None:
    """llama.cpp system_info ARCHS ("890", "1200"): the architectures compiled, taken as SASS."""
    if not archs:
        return None
    targets = []
    for arch in archs:
        if not arch.isdigit() or len(arch) < 3:
            return None
        major, minor = int(arch[:-2]), int(arch[-2])
        targets.append(Target(major, minor, ptx=False))
    return targets


def from_names(names: list[str]) -> list[Target]:
    """sm_86 / compute_90 style names, as torch.cuda.get_arch_list() prints them."""
    targets = []
    for name in names:
        match = re.fullmatch(r"(sm|compute)_(\d{2,3})([af]?)", name.strip().lower())
        if match:
            major, minor = _split_number(match.group(2))
            targets.append(
                Target(major, minor, ptx=match.group(1) == "compute", suffix=match.group(3))
            )
    return targets


def from_versions(sass: list[str], ptx: list[str]) -> list[Target]:
    """Targets from "8.6"-style lists of SASS and PTX compute capabilities."""
    out = []
    for values, is_ptx in ((sass, False), (ptx, True)):
        for value in values:
            cc = cc_tuple(value)
            if cc is not None:
                out.append(Target(cc[0], cc[1], ptx=is_ptx))
    return out


def covers(targets: list[Target], cc: tuple[int, int]) -> bool:
    """Whether any target runs on a GPU of compute capability `cc`."""
    return any(target.runs_on(cc) for target in targets)


def describe(targets: list[Target]) -> str:
    """A short, stable label list: "sm_86, sm_89, compute_89"."""
    ordered = sorted(set(targets), key=lambda t: (t.ptx, t.major, t.minor, t.suffix))
    return ", ".join(dict.fromkeys(t.label() for t in ordered))
