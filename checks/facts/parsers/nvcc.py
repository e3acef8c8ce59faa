"""CUDA toolkits: every nvcc on the host, its version and the GPU architectures it can target."""

from __future__ import annotations

import re

from checks.facts.model import HostFacts, Toolkit
from checks.facts.parsers import Format, sections
from checks.facts.probe import Probe

_RELEASE = re.compile(r"Cuda compilation tools, release (\d+\.\d+), V(\d+\.\d+(?:\.\d+)?)")
# [^\S\n]: leading blanks of this line only; "^\s*" would rescan every following blank line.
_ARCH = re.compile(r"^[^\S\n]*(compute_\d+[a-z]?)\s*$", re.MULTILINE)
# [^{}]: each "cuda" object is scanned up to its own braces, never to the end of the text.
_UPDATE = re.compile(r'"cuda"\s*:\s*\{[^{}]*?"version"\s*:\s*"(\d+\.\d+\.\d+)"')
_CUDA_ROOT = re.compile(r"^(/.+)/bin/nvcc$")

# One section per nvcc, deduplicated by resolved path: `PATH`, the toolkit directories, and pip's
# nvidia-cuda-nvcc wheels in the usual site directories. The toolkit's version.json, when there is
# one, tells the update (13.2.2) that nvcc's own banner does not.
NVCC_COMMAND = (
    sections.SITE_DIRS
    + r"""
seen=' '
run() { if command -v timeout >/dev/null 2>&1; then timeout 15 "$@"; else "$@"; fi; }
emit() {
  r=$(readlink -f "$2" 2>/dev/null) || r=$2
  case "$seen" in *" $r "*) return 0;; esac
  seen="$seen$r "
  echo "### gpuprov:nvcc $1 $r"
  run "$r" --version 2>&1
  run "$r" --list-gpu-arch 2>&1
  v="${r%/bin/nvcc}/version.json"
  [ -f "$v" ] && head -c 400 "$v"
}
p=$(command -v nvcc 2>/dev/null) && [ -x "$p" ] && emit PATH "$p"
for c in /usr/local/cuda/bin/nvcc /usr/local/cuda-*/bin/nvcc /opt/cuda/bin/nvcc; do
  [ -x "$c" ] && emit dir "$c"
done
for s in $(site_dirs); do
  for c in "$s"/nvidia/cuda_nvcc/bin/nvcc "$s"/nvidia/cu1*/bin/nvcc; do
    [ -x "$c" ] && emit pip "$c"
  done
done
exit 0
"""
)


def parse_nvcc(text: str) -> HostFacts:
    """`nvcc --version` and/or `nvcc --list-gpu-arch` output, or the nvcc probe's sections."""
    facts = HostFacts()
    parts = [p for p in sections.split(text) if p.name == "nvcc" and p.argument]
    if not parts:
        toolkit = _toolkit(text)
        if toolkit.version is not None or toolkit.gpu_archs is not None:
            facts.toolkits.append(toolkit)
        return facts
    for part in parts:
        via, _, path = (part.argument or "").partition(" ")
        toolkit = _toolkit(part.text)
        toolkit.path = path or None
        toolkit.source = _source(via, path)
        facts.toolkits.append(toolkit)
    facts.toolkits = _fold_path_wrappers(facts.toolkits)
    return facts


def _fold_path_wrappers(toolkits: list[Toolkit]) -> list[Toolkit]:
    """A PATH nvcc that is a wrapper script for a toolkit directory's nvcc is that toolkit.

    Wrappers do not resolve with readlink, so they match on the same version and arch list.
    """
    out = []
    for toolkit in toolkits:
        same = [
            other
            for other in toolkits
            if other is not toolkit
            and other.source not in ("PATH", "pip")
            and (other.version, other.gpu_archs) == (toolkit.version, toolkit.gpu_archs)
        ]
        if toolkit.source == "PATH" and toolkit.version is not None and same:
            same[0].source = f"{same[0].source} (on PATH as {toolkit.path})"
            continue
        out.append(toolkit)
    return out


def _toolkit(text: str) -> Toolkit:
    toolkit = Toolkit()
    match = _RELEASE.search(text)
    if match is not None:
        toolkit.release, toolkit.version = match.group(1), match.group(2)
    update = _UPDATE.search(text)
    if update is not None:
        toolkit.update = update.group(1)
    archs = _ARCH.findall(text)
    if archs:
        toolkit.gpu_archs = list(dict.fromkeys(archs))
    return toolkit


def _source(via: str, path: str) -> str:
    """How the nvcc was found: "PATH", "pip", or its toolkit directory ("/usr/local/cuda-13.0")."""
    if via in ("PATH", "pip"):
        return via
    root = _CUDA_ROOT.match(path)
    return root.group(1) if root else path


# CMake's configure log: "-- The CUDA compiler identification is NVIDIA 11.3.109" is the nvcc it
# found ("... is unknown" when it found none that works); CMake 4 appends " with host compiler
# GNU 13.3.0".
_CMAKE_ID = re.compile(
    r"^-- The CUDA compiler identification is NVIDIA (\d+\.\d+\.\d+)"
    r"(?: with host compiler [^\n]*)?[ \t]*$",
    re.M,
)
_CMAKE_NVCC = re.compile(
    r"^-- Check for working CUDA compiler: (/\S*/nvcc)(?: - skipped)?[ \t]*$", re.M
)


def parse_cmake_cuda(text: str) -> HostFacts:
    """CMake's CUDA compiler identification: the nvcc's version, and its path when checked."""
    facts = HostFacts()
    found = _CMAKE_ID.search(text)
    if found is not None:
        path = _CMAKE_NVCC.search(text)
        version = found.group(1)
        release = ".".join(version.split(".")[:2])
        facts.toolkits.append(
            Toolkit(path=path.group(1) if path else None, version=version, release=release)
        )
    return facts


def detect_cmake_cuda(text: str) -> bool:
    return _CMAKE_ID.search(text) is not None


def detect_nvcc(text: str) -> bool:
    """nvcc's banner or a --list-gpu-arch listing."""
    return "Cuda compilation tools, release" in text or len(_ARCH.findall(text)) >= 3


FORMATS = [
    Format("nvcc", detect_nvcc, parse_nvcc),
    Format("cmake CUDA compiler", detect_cmake_cuda, parse_cmake_cuda),
]

PROBES = [Probe("nvcc", NVCC_COMMAND, parse_nvcc, timeout=60.0)]
