"""CUDA toolkits: every nvcc on the host, its version and the GPU architectures it can target."""

from __future__ import annotations

import re

from checks.facts import HostFacts, Toolkit
from checks.parsers import Format
from checks.probe import Probe

_RELEASE = re.compile(r"Cuda compilation tools, release (\d+\.\d+), V(\d+\.\d+(?:\.\d+)?)")
_ARCH = re.compile(r"^\s*(compute_\d+[a-z]?)\s*$", re.MULTILINE)
_MARKER = re.compile(r"^### gpuprov:nvcc (PATH|dir|pip) (\S.*?)\s*$", re.MULTILINE)
_CUDA_ROOT = re.compile(r"^(/.+)/bin/nvcc$")

# One section per nvcc, deduplicated by resolved path: `PATH`, the toolkit directories, and pip's
# nvidia-cuda-nvcc wheels in python3's site directories (and an active virtualenv or conda env).
NVCC_COMMAND = r"""seen=' '
run() { if command -v timeout >/dev/null 2>&1; then timeout 15 "$@"; else "$@"; fi; }
emit() {
  r=$(readlink -f "$2" 2>/dev/null) || r=$2
  case "$seen" in *" $r "*) return 0;; esac
  seen="$seen$r "
  echo "### gpuprov:nvcc $1 $r"
  run "$r" --version 2>&1
  run "$r" --list-gpu-arch 2>&1
}
p=$(command -v nvcc 2>/dev/null) && [ -x "$p" ] && emit PATH "$p"
for c in /usr/local/cuda/bin/nvcc /usr/local/cuda-*/bin/nvcc /opt/cuda/bin/nvcc; do
  [ -x "$c" ] && emit dir "$c"
done
sites=$( (command -v python3 >/dev/null 2>&1 && python3 -c 'import sys
print("\n".join(p for p in sys.path if p.endswith(("site-packages", "dist-packages"))))'
  for e in "$VIRTUAL_ENV" "$CONDA_PREFIX"; do
    [ -n "$e" ] && ls -d "$e"/lib/python3*/site-packages
  done
) 2>/dev/null)
IFS='
'
for s in $sites; do
  for c in "$s"/nvidia/cuda_nvcc/bin/nvcc "$s"/nvidia/cu1*/bin/nvcc; do
    [ -x "$c" ] && emit pip "$c"
  done
done
exit 0
"""


def parse_nvcc(text: str) -> HostFacts:
    """`nvcc --version` and/or `nvcc --list-gpu-arch` output, or the nvcc probe's sections."""
    facts = HostFacts()
    markers = list(_MARKER.finditer(text))
    if not markers:
        toolkit = _toolkit(text)
        if toolkit.version is not None or toolkit.gpu_archs is not None:
            facts.toolkits.append(toolkit)
        return facts
    for i, marker in enumerate(markers):
        end = markers[i + 1].start() if i + 1 < len(markers) else len(text)
        toolkit = _toolkit(text[marker.end() : end])
        toolkit.path = marker.group(2)
        toolkit.source = _source(marker.group(1), toolkit.path)
        facts.toolkits.append(toolkit)
    return facts


def _toolkit(text: str) -> Toolkit:
    toolkit = Toolkit()
    match = _RELEASE.search(text)
    if match is not None:
        toolkit.release, toolkit.version = match.group(1), match.group(2)
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


def detect_nvcc(text: str) -> bool:
    """nvcc's banner or a --list-gpu-arch listing."""
    return "Cuda compilation tools, release" in text or len(_ARCH.findall(text)) >= 3


FORMATS = [Format("nvcc", detect_nvcc, parse_nvcc)]

PROBES = [Probe("nvcc", NVCC_COMMAND, parse_nvcc, timeout=60.0)]
