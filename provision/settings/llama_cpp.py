"""The llama_cpp role's settings: where the source comes from and how it is built."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from provision.settings import read
from provision.settings.read import StackError

CUDA_ARCH = re.compile(r"[0-9]{2,3}[af]?(-real|-virtual)?")
GIT_REF = re.compile(r"[A-Za-z0-9._/-]+")


@dataclass(frozen=True)
class Source:
    """Where llama.cpp's source comes from: a pinned git ref, or a tarball for offline hosts."""

    git_url: str
    ref: str
    tarball: str = ""
    tarball_subdir: str = ""

    @property
    def kind(self) -> str:
        return "tarball" if self.tarball else "git"


def source(v: Mapping[str, Any]) -> Source:
    """The source: a git URL and ref safe on a command line, or a tarball on this machine."""
    found = Source(
        git_url=read.text(v, "llama_cpp_git_url"),
        ref=read.text(v, "llama_cpp_ref"),
        tarball=read.text(v, "llama_cpp_tarball", empty=True),
        tarball_subdir=read.text(v, "llama_cpp_tarball_subdir", empty=True),
    )
    for key in ("llama_cpp_git_url", "llama_cpp_ref"):
        if str(v.get(key) or "").startswith("-"):
            raise StackError(key, "must not start with '-'")
    if found.tarball and not _is_file(found.tarball):
        raise StackError("llama_cpp_tarball", f"no such file on this machine: {found.tarball!r}")
    if not found.tarball and not GIT_REF.fullmatch(found.ref):
        raise StackError("llama_cpp_ref", f"not a git ref: {found.ref!r}")
    return found


def _is_file(path: str) -> bool:
    """Whether `path` is a file here; a name the system cannot look up (too long) is none."""
    try:
        return Path(path).is_file()
    except (OSError, ValueError):
        return False


def architectures(v: Mapping[str, Any]) -> str:
    """CMAKE_CUDA_ARCHITECTURES, "" for the build's own choice."""
    archs = str(v.get("llama_cpp_cuda_architectures") or "")
    if archs and not all(CUDA_ARCH.fullmatch(a) for a in archs.split(";")):
        raise StackError("llama_cpp_cuda_architectures", f"expected e.g. '86;120a', got {archs!r}")
    return archs


def compiler(v: Mapping[str, Any]) -> str:
    """The nvcc to build with, "" to find one on the host."""
    return read.absolute(v, "llama_cpp_cuda_compiler") if v.get("llama_cpp_cuda_compiler") else ""
