"""llama.cpp builds: start-up output (devices, system_info), --version, CMake build records."""

from __future__ import annotations

import re

from checks.facts import gpus as catalogue
from checks.facts.model import Gpu, HostFacts, LlamaCppBuild
from checks.facts.parsers import Format, sections
from checks.facts.probe import Probe

# "  Device 0: NAME, compute capability 8.6, VMM: yes[, VRAM: 8150 MiB]" (ggml_cuda_init) and
# "  Device 0: NAME, compute capability 6.1" (ggml_init_cublas, 2023); a user may bold the middle.
# A terminal that wrapped the paste may join it to "found N CUDA devices:" on one line.
_DEVICE = re.compile(
    r"(?:^|CUDA devices:)[^\S\n]*Device (\d{1,4}): ([^\n]+?), "
    r"\**compute capability (\d+\.\d+)\**(?:, VMM: (?:yes|no))?(?:, VRAM: (\d+) MiB)?",
    re.MULTILINE,
)
# A paste cut below "found N CUDA devices:" keeps only device lines (ollama/ollama#12403, behind
# a journal's prefix that capture.clean takes off): read alone only in
# ggml_cuda_init's full shape, its ", VMM: yes|no" included.
_DEVICE_ALONE = re.compile(
    r"^[^\S\n]*Device \d{1,4}: [^\n]+?, compute capability \d+\.\d+, VMM: (?:yes|no)\b",
    re.MULTILINE,
)
# CUDA numbers its devices 0..N-1: a listed "Device 2" means devices 0 and 1 exist, named or not.
_MAX_FILLED = 16
# Since 2026, under "found 1 CUDA devices (Total VRAM: 7805 MiB):":
# "  CUDA0: NAME (7805 MiB, 7546 MiB free)"; common_params_print_info's "device_info:" block
# prints "  - CUDA0   : NAME (24575 MiB, 23332 MiB free)" (common/common.cpp, "  - %-8s: ").
_CUDA_DEVICE = re.compile(
    r"^[^\S\n]*(?:- )?CUDA(\d{1,4})[ \t]{0,8}: ([^\n]*) \((\d+) MiB, \d+ MiB free\)[ \t]*$",
    re.M,
)
# A Vulkan build's "ggml_vulkan: 0 = NVIDIA GeForce RTX 3060 (NVIDIA) | uma: 0 | fp16: 1 | ...",
# and before it "Vulkan0: NVIDIA GeForce RTX 3060 Laptop GPU (NVIDIA) | uma: 0 | fp16: 1 | warp
# size: 32" (2024, ggml-org/llama.cpp#9716): the device's name and its driver's; read for
# NVIDIA's driver only (the earliest "Vulkan0: NAME | uma: 0" names no driver and is not read).
_VULKAN_DEVICE = re.compile(
    r"^(?:ggml_vulkan: (\d{1,3}) = |Vulkan(\d{1,3}): )([^\n|]{1,120}?) \(NVIDIA\) \| uma: ", re.M
)
# "llama_model_load_from_file_impl: using device CUDA0 (NAME) (0000:01:00.0) - 15055 MiB free";
# the bus id is there since 2025. Read with str methods: the name may hold parentheses.
_USING = "llama_model_load_from_file_impl: using device CUDA"
_CUDA_INIT = re.compile(r"^[^\S\n]*(?:ggml_cuda_init|ggml_init_cublas): ", re.MULTILINE)
_BUS = re.compile(r"(?:[0-9A-Fa-f]{4,8}:)?[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]")
_SYSTEM_INFO = re.compile(r"^system_info: ([^\n]*)", re.MULTILINE)
# "build: 9535 (da87e9b61) with cc ..." in logs; "version: 9535 (da87e9b61)" from --version.
_BUILD = re.compile(r"^(?:build|version): (\d+) \(([0-9a-f]{6,40}|unknown)\)", re.MULTILINE)
# Until "build:" replaced it in 2024, each program printed its own name, then its compiler on the
# next line (ggml-org/llama.cpp#6184): "main: build = 2477 (f9c7ba34)" / "main: built with cc".
_OLD_BUILD = re.compile(
    r"^[\w-]{1,40}: build = (\d+) \(([0-9a-f]{6,40}|unknown)\)[ \t]*\n[\w-]{1,40}: built with ",
    re.MULTILINE,
)
# A CUDA build that found no device says so, in the words of 2023 (ggml_init_cublas) or 2024
# (ggml_cuda_init), in a log or quoted in a sentence: the build has CUDA; how many GPUs the host
# has is not said (the runtime also says it when it cannot start).
_NO_DEVICES = re.compile(
    r"(?<![\w-])(?:ggml_cuda_init|ggml_init_cublas): no CUDA devices found, CUDA will be disabled"
)
# Since the versioned releases: "version: 0.4.1-dev (build 10991, commit 930e2fa59)".
_RELEASE = re.compile(
    r"^version: \S+ \(build (\d+), commit ([0-9a-f]{6,40}|unknown)\)", re.MULTILINE
)
_CACHE = re.compile(
    r"^(CMAKE_CUDA_ARCHITECTURES|GGML_CUDA|GGML_CUBLAS|LLAMA_CUDA|LLAMA_CUBLAS"
    r"|GGML_CUDA_COMPRESSION_MODE):[A-Z]+=([^\n]*)$",
    re.MULTILINE,
)
# The bug template's "### Hardware" answer, right below the heading: a line that is a whole
# NVIDIA name the GPU catalogue knows is a GPU ("NVIDIA GeForce RTX 5070", ggml-org/llama.cpp
# #18382); lines that mix words ("Ryzen 5 2600 + MSI 1660 Ti") stay unread. Only in the template,
# known by another of its headings, and only where no device line names the GPUs.
_HARDWARE = re.compile(r"^### Hardware[ \t]*$", re.MULTILINE)
_TEMPLATE = re.compile(r"^### (?:Name and Version|GGML backends)[ \t]*$", re.MULTILINE)
_HARDWARE_NAME = re.compile(rf"{catalogue.NAME_START}[\w -]{{1,60}}")
_HARDWARE_LINES = 6
_COMPILER_VERSION = re.compile(r'^set\(CMAKE_CUDA_COMPILER_VERSION "([^"]+)"\)', re.MULTILINE)

# Candidate binaries, one per directory (llama-server, else llama-cli), deduplicated by the
# resolved directory; a build directory's CMakeCache.txt is two levels up from bin/.
LLAMACPP_COMMAND = r"""seen=' '
run() { if command -v timeout >/dev/null 2>&1; then timeout 20 "$@"; else "$@"; fi; }
emit() {
  r=$(readlink -f "$1" 2>/dev/null) || r=$1
  d=${r%/*}
  case "$seen" in *" $d "*) return 0;; esac
  seen="$seen$d "
  echo "### gpuprov:llamacpp $r"
  run "$r" --version 2>&1 </dev/null
  b=${d%/*}
  if [ -f "$b/CMakeCache.txt" ]; then
    keys='CMAKE_CUDA_ARCHITECTURES|CMAKE_CUDA_COMPILER|GGML_CUDA|GGML_CUDA_COMPRESSION_MODE'
    grep -E "^($keys|GGML_CUBLAS|LLAMA_CUDA|LLAMA_CUBLAS):" "$b/CMakeCache.txt"
    cat "$b"/CMakeFiles/*/CMakeCUDACompiler.cmake 2>/dev/null |
      grep -m 1 'CMAKE_CUDA_COMPILER_VERSION'
  fi
}
for name in llama-server llama-cli; do
  p=$(command -v "$name" 2>/dev/null) && [ -x "$p" ] && emit "$p"
done
for d in "$HOME/llama.cpp/build/bin" /opt/llama.cpp*/build/bin /opt/llama.cpp*/bin \
    /opt/gpuprov/llama.cpp/current/bin; do
  for name in llama-server llama-cli; do
    [ -x "$d/$name" ] && { emit "$d/$name"; break; }
  done
done
exit 0
"""


def parse_llamacpp(text: str) -> HostFacts:
    """A llama.cpp log, `--version` output, CMakeCache lines, or the probe's per-build sections."""
    facts = HostFacts()
    facts.gpus = _devices(text) or _hardware(text)
    parts = [s for s in sections.split(text) if s.name == "llamacpp" and s.argument]
    if not parts:
        build = _build(text)
        if build != LlamaCppBuild():
            facts.llamacpp.append(build)
        return facts
    for part in parts:
        build = _build(part.text)
        build.path = part.argument
        facts.llamacpp.append(build)
    return facts


def _devices(text: str) -> list[Gpu]:
    """The CUDA devices of the start-up lines, by their CUDA index."""
    gpus: dict[int, Gpu] = {}
    for index, name, capability, vram in _DEVICE.findall(text):
        gpus.setdefault(
            int(index),
            Gpu(
                index=int(index),
                name=name,
                compute_capability=capability,
                memory_total_mib=int(vram) if vram else None,
            ),
        )
    for index, name, total in _CUDA_DEVICE.findall(text):
        gpu = gpus.setdefault(int(index), Gpu(index=int(index), name=name.strip() or None))
        gpu.memory_total_mib = gpu.memory_total_mib or int(total)
    for line in text.split("\n"):
        used = _using_device(line)
        if used is not None:
            gpu = gpus.setdefault(used[0], Gpu(index=used[0], name=used[1]))
            gpu.pci_bus_id = gpu.pci_bus_id or used[2]
    if not gpus:  # Vulkan's numbering is its own: read only where no CUDA device is listed
        for old, new, name in _VULKAN_DEVICE.findall(text):
            index = int(old or new)
            gpus.setdefault(index, Gpu(index=index, name=name.strip()))
    if gpus and max(gpus) < _MAX_FILLED:
        for index in range(max(gpus)):
            gpus.setdefault(index, Gpu(index=index))
    return [gpus[index] for index in sorted(gpus)]


def _hardware(text: str) -> list[Gpu]:
    """The GPUs named, one a line, in the template's answer right below "### Hardware"."""
    heading = _HARDWARE.search(text)
    if heading is None or _TEMPLATE.search(text) is None:
        return []
    found: list[Gpu] = []
    lines = text[heading.end() :].lstrip("\n").split("\n", _HARDWARE_LINES)[:_HARDWARE_LINES]
    for line in lines:
        name = line.strip()
        if not name or name.startswith("#"):
            break
        if _HARDWARE_NAME.fullmatch(name) and catalogue.lookup(name) is not None:
            found.append(Gpu(name=name))
    return found


def _using_device(line: str) -> tuple[int, str, str | None] | None:
    """(CUDA index, name, bus id) of a "using device CUDA0 (NAME) [(BUS)] - N MiB free" line."""
    start = line.find(_USING)
    if start == -1 or not line.rstrip().endswith(" MiB free"):
        return None
    rest = line[start + len(_USING) :]
    digits = len(rest) - len(rest.lstrip("0123456789"))
    tail = rest.rfind(") - ")
    if not 0 < digits <= 4 or not rest.startswith(" (", digits) or tail == -1:
        return None
    inner = rest[digits + 2 : tail]  # "NAME" or "NAME) (0000:01:00.0"
    bus = None
    name, sep, last = inner.rpartition(") (")
    if sep and _BUS.fullmatch(last):
        bus = last
    else:
        name = inner
    return (int(rest[:digits]), name, bus) if name.strip() else None


def _build(text: str) -> LlamaCppBuild:
    build = LlamaCppBuild()
    version = _BUILD.search(text) or _RELEASE.search(text) or _OLD_BUILD.search(text)
    if version is not None and version.group(2) != "unknown":
        build.version, build.commit = version.group(1), version.group(2)
    elif version is not None and version.group(1) != "0":
        build.version = version.group(1)
    if _CUDA_INIT.search(text) or _NO_DEVICES.search(text):
        build.cuda = True
    info = _SYSTEM_INFO.search(text)
    if info is not None:
        _system_info(build, info.group(1))
    for key, value in _CACHE.findall(text):
        _cache(build, key, value.rstrip())
    compiler = _COMPILER_VERSION.search(text)
    build.cuda_compiler_version = compiler.group(1) if compiler else None
    return build


def _system_info(build: LlamaCppBuild, line: str) -> None:
    """ "... | CUDA : ARCHS = 890 | USE_GRAPHS = 1 | ... | CPU : SSE3 = 1 | ..." """
    backend = ""
    features: dict[str, dict[str, str]] = {}
    for part in line.split("|"):
        name, sep, rest = part.partition(" : ")
        if sep:
            backend = name.strip()
            part = rest
        key, eq, value = part.partition("=")
        if eq and backend:
            features.setdefault(backend, {})[key.strip()] = value.strip()
    cuda = features.get("CUDA")
    if cuda is None:
        if "CPU" in features and build.cuda is None:
            build.cuda = False
        return
    build.cuda = True
    archs = [a for a in re.split(r"[,;\s]+", cuda.get("ARCHS", "")) if a]
    build.cuda_archs = archs or None
    fp4 = cuda.get("BLACKWELL_NATIVE_FP4")
    build.blackwell_native_fp4 = fp4 == "1" if fp4 in ("0", "1") else None


def _cache(build: LlamaCppBuild, key: str, value: str) -> None:
    if key == "CMAKE_CUDA_ARCHITECTURES":
        build.cmake_cuda_architectures = value or None
    elif key == "GGML_CUDA_COMPRESSION_MODE":
        build.compression_mode = value or None
    elif value.upper() in ("ON", "TRUE", "1", "YES"):
        build.cuda = True
    elif key == "GGML_CUDA" and build.cuda is None:
        build.cuda = False


def detect_llamacpp(text: str) -> bool:
    return (
        _CUDA_INIT.search(text) is not None
        or _DEVICE_ALONE.search(text) is not None
        or _CUDA_DEVICE.search(text) is not None
        or _VULKAN_DEVICE.search(text) is not None
        or _USING in text
        or _SYSTEM_INFO.search(text) is not None
        or re.search(r"^GGML_CUDA:BOOL=", text, re.MULTILINE) is not None
        or re.search(r"^version: \d+ \([0-9a-f]{6,40}\)", text, re.MULTILINE) is not None
        or _RELEASE.search(text) is not None
        or _OLD_BUILD.search(text) is not None
        or _NO_DEVICES.search(text) is not None
        or bool(_hardware(text))
    )


FORMATS = [Format("llama.cpp", detect_llamacpp, parse_llamacpp)]

PROBES = [Probe("llama.cpp", LLAMACPP_COMMAND, parse_llamacpp, timeout=90.0)]
