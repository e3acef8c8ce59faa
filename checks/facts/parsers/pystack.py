"""The Python ML stack (torch, vLLM, llama-cpp-python, ...) from package metadata, not imports."""

from __future__ import annotations

import re

from checks import versions
from checks.facts.model import HostFacts, PythonPackage
from checks.facts.parsers import Format, sections
from checks.facts.probe import Probe

# Distribution names as they appear in dist-info directories (underscored) and as globs.
DIST_GLOBS = (
    "torch-*",
    "vllm-*",
    "llama_cpp_python-*",
    "flash_attn-*",
    "flashinfer_python-*",
    "triton-*",
    "pytorch_triton-*",
    "xformers-*",
    "bitsandbytes-*",
    "sglang-*",
    "exllamav2-*",
    "tensorrt_llm-*",
    "nvidia_cuda_runtime*-*",
    "nvidia_cuda_nvcc*-*",
    "nvidia_cublas*-*",
    "nvidia_cudnn*-*",
    "nvidia_nccl*-*",
)
_RELEVANT = re.compile(
    r"^(?:torch|vllm|llama-cpp-python|flash-attn|flashinfer-python|triton|pytorch-triton|xformers"
    r"|bitsandbytes|sglang|exllamav2|tensorrt-llm"
    r"|nvidia-(?:cuda-runtime|cuda-nvcc|cublas|cudnn|nccl)(?:-cu\d+)?)$"
)
_META = re.compile(r"^(Name|Version): (\S+)\s*$", re.MULTILINE)
_VERSION = r"\d[\w.+!-]*"
# "torch==2.6.0+cu126" (freeze), "[pip3] torch==2.7.0" (collect_env), "torch   2.6.0+cu126" (list).
_PIP_LINE = re.compile(
    rf"^(?:\[(?:pip3?|conda)\] )?(?P<name>[A-Za-z][\w.-]*)(?:==| +)(?P<version>{_VERSION})"
    r"(?: +\S+)*\s*$",
    re.MULTILINE,
)

_GLOBS = " ".join(f'"$d"/{pattern}.dist-info "$d"/{pattern}.egg-info' for pattern in DIST_GLOBS)
PYSTACK_COMMAND = (
    sections.SITE_DIRS
    + rf"""
site_dirs | sort -u | while IFS= read -r d; do
  [ -d "$d" ] || continue
  for m in {_GLOBS}; do
    for f in "$m/METADATA" "$m/PKG-INFO"; do
      [ -f "$f" ] || continue
      echo "### gpuprov:dist $m"
      grep -m 2 -E '^(Name|Version):' "$f"
      break
    done
  done
done
exit 0
"""
)


def normalise_name(name: str) -> str:
    """PEP 503 form: lower case, runs of "-", "_", "." as one "-"."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _package(name: str, version: str | None, location: str | None = None) -> PythonPackage:
    normalised = normalise_name(name)
    package = PythonPackage(name=normalised, version=version, location=location)
    cuda = versions.torch_cuda(version)
    if cuda is None and normalised.startswith("nvidia-cuda-runtime"):
        cuda = versions.release(version)
    package.cuda_version = str(cuda) if cuda is not None else None
    return package


def parse_dist_info(text: str) -> HostFacts:
    """The pystack probe: per distribution, its metadata directory then its Name and Version."""
    facts = HostFacts()
    for part in sections.split(text):
        if part.name != "dist" or not part.argument or not part.argument.startswith("/"):
            continue
        meta = dict(_META.findall(part.text))
        path = part.argument.rstrip("/")
        location, _, dirname = path.rpartition("/")
        name = meta.get("Name") or re.sub(r"-\d.*$", "", dirname)
        if _RELEVANT.match(normalise_name(name)):
            facts.python.append(_package(name, meta.get("Version"), location or None))
    return facts


def parse_pip_list(text: str) -> HostFacts:
    """`pip list` / `pip freeze` lines (and collect_env's "[pip3] torch==2.7.0") of the ML stack."""
    facts = HostFacts()
    seen: set[str] = set()
    for match in _PIP_LINE.finditer(text):
        name = normalise_name(match.group("name"))
        if _RELEVANT.match(name) and name not in seen:
            seen.add(name)
            facts.python.append(_package(name, match.group("version")))
    return facts


def detect_pip_list(text: str) -> bool:
    return any(_RELEVANT.match(normalise_name(m.group("name"))) for m in _PIP_LINE.finditer(text))


FORMATS = [Format("pip-list", detect_pip_list, parse_pip_list)]

PROBES = [Probe("python-stack", PYSTACK_COMMAND, parse_dist_info, timeout=30.0)]
