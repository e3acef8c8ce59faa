"""Scan a log stream for known failure signatures, in constant memory.

A handful of literal anchors pick the candidate lines (GNU grep -F when the machine has it, else
bytes.find over large chunks), and only those are decoded, cleaned of colour codes, quote marks and
"(VllmWorker rank=0 pid=123) ERROR 06-05 ..." prefixes, and matched against the signatures' full
patterns. Lines that carry facts (an nvidia-smi header, device lines, collect_env) are kept in a
bounded buffer for the fact parsers.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

from checks import packaged
from checks.facts.capture import JOURNAL_MONTH

CHUNK = 16 << 20
MAX_LINE = 4096
MAX_FACT_BYTES = 256 << 10
EVIDENCE = 3

# Every line a signature matches holds one of these (error, ERROR, failed, nvcc fatal, "requires",
# graph capture/capturing, module signing, PyTorch's OOM detail and vLLM's "max seq len" lines,
# which are often pasted without their exception name; the kernel's refusals of the open module,
# "nvidia.ko" also in wrapped pastes without their NVRM: prefix, and of a GPU nova_core holds;
# ollama's "cuda driver library init failure" and ldconfig's "is not a symbolic link"; nvcc's
# "Unsupported gpu architecture" pasted without "nvcc fatal"; both halves of an "...so: undefined
# / symbol: _Z..." line wrapped in a paste; NCCL's INFO line of a kernel too large for the GPU's
# shared memory; ggml's abort for a missing CUDA arch, which GGML_ABORT prints bare; CMake's "No
# CMAKE_CUDA_COMPILER could be found", indented under its "CMake Error" line; a cuDNN, bitsandbytes
# or TensorRT library the loader names ("Unable to load any of {libcudnn_ops.so.9...}", "...
# libbitsandbytes_cuda128.dll", "...this version of TensorRT") in warnings without an error word;
# PyTorch's cudaMallocAsync OOM, pasted without its exception name; llama-server's "couldn't bind
# HTTP server socket"; "rootless", which tells a rootless engine's eBPF refusal from a rootful
# one's and is pasted in prose or a docker context line; WSL as a paste shows it, for signatures
# whose fix differs there: the word, a WSL2 kernel ("5.15.90.1-microsoft-standard-WSL2", older
# "4.19.128-microsoft-standard"), /usr/lib/wsl/ and the wsl command). Few,
# specific anchors keep the prefilter fast: grep -F slows with every string added, a loop of
# bytes.find pays one pass per anchor, and every candidate line is matched against every
# signature (so not "NVRM", which prefixes every line of a driver's dmesg). The signatures' match
# fixtures prove the coverage: a signature whose lines lack an anchor cannot match them.
ANCHORS = (
    b"rror",
    b"RROR",
    b"ailed",
    b"fatal",
    b"requires",
    b"aptur",
    b"Key was rejected",
    b"Required key",
    b"Tried to allocate",
    b"max seq len",
    b"nvidia.ko",
    b"NovaCore",
    b"init failure",
    b"symbolic link",
    b"undefined symbol",
    b"nsupported gpu architecture",
    b"so: undefined",
    b"symbol: _Z",
    b"ncclMaxSharedMem",
    b"not compiled with any CUDA arch",
    b"API mismatch",
    b"wsl",
    b"WSL",
    b"microsoft-standard",
    b"No CMAKE_CUDA_COMPILER",
    b"cudnn_",
    b"libbitsandbytes_cuda",
    b"version of TensorRT",
    b"would exceed allowed memory",
    b"non-NVML platform",
    b"application-profiles-rc",
    b"couldn't bind",
    b"ootless",
    b"Unknown CUDA arch",  # torch cpp_extension's refusal, quoted without its ValueError
    b"cuDNN version",  # torch's cuDNN incompatibility, pasted without its RuntimeError
    b"for option 'gpu-name'",  # ptxas's unknown-arch refusal, quoted without "ptxas fatal"
    b"Could NOT find CUDA",  # CMake's FindCUDA and FindCUDAToolkit, on a status or message line
    b"fallen off",  # Xid 79's "GPU has fallen off the bus", an NVRM line with no error word
    b"region assigned to your NVIDIA",  # the probe's refusal of a BAR the firmware left unmapped
    b"unsupported toolchain",  # the PTX JIT's refusal as hashcat's cuLinkAddData() prints it
    b"support efficient",  # CTranslate2's compute-type refusal, as C++ hosts and GUIs print it
    b".singularity.d/libs/",  # the loader's glibc refusal of a library Apptainer's --nv bound
    b"invalid device function",  # cudaErrorInvalidDeviceFunction as miners print it: "GPU 0: ..."
    b"No CUDA toolset",  # CMake's VS generator without CUDA's Visual Studio integration
    b"zlibwapi",  # cuDNN 8's "Could not locate zlibwapi.dll", printed without an error word
    b"+cpu)",  # xFormers' load warning naming a CPU-only torch: "(you have 2.1.2+cpu)"
    b"vendor err",  # NCCL 2.20+'s IB completion failure: "with status=12 ... vendor err 129"
    b"cuda-compat",  # a forward-compat package or ld.so.conf.d entry, context for Error 803
    b"/compat",  # a CUDA forward-compat directory (/usr/local/cuda/compat) on a library path
    b"Cuda failure",  # NCCL's WARN for a failed CUDA call: "NCCL WARN Cuda failure 1 '...'"
    b"library at user",  # ollama skipping a library OLLAMA_LLM_LIBRARY did not name (a DEBUG line)
    b"GPU is lost",  # NVML's lost GPU as nvidia-smi prints it: "Unable to determine the device ..."
    b"CUDA_VISIBLE_DEVICES",  # a shell, script or env line that sets it, context for "no device"
    b"lib under the names",  # cudarc's panic for a library it cannot load, with no error word
    b"Unable to dynamically load",  # the same panic in later cudarc releases
    b"nvcuda.dll",  # the driver's DLL, named by Windows' "procedure entry point" refusal
    b"src/backend/cuda/",  # ArrayFire's "In file src/backend/cuda/jit.cpp:342" before a CU error
    b"=> not found",  # ldd's and ntldd's line for a library the loader cannot find, no error word
    b"not compiled with CUDA",  # torch's CPU-only assertion, quoted without its AssertionError
    b"is_sm75 to be true",  # flash-attn 1.x's arch check, quoted without its RuntimeError
    b"Dynamic LLM libraries",  # ollama's start-up list of runners, an INFO line
    b"cuMemAddressReserve",  # ggml's failed pool reservation, the line after its "CUDA error"
    b"kernel image is available",  # CUDA's no-kernel-image string, printed or quoted bare
    b"DKMS module",  # Void's DKMS hook: "Building DKMS module '...' for kernel-...... FAILED!"
    b"is not a recognized processor",  # Triton's LLVM warning for an NVPTX arch it does not know
    b"nvenc API version",  # FFmpeg's NVENC refusal of an old driver, printed without an error word
    b"driver for nvenc",  # FFmpeg's minimum-driver line after it, context for the driver it names
    b"link time reference",  # the loader's versioned-symbol refusal, quoted without its error word
    b"Paddle is compiled with",  # PaddlePaddle's cuDNN (and CUDA) version warning, a WARNING line
    # Each signature's own words, as issue titles and quotes paste them bare, without the error
    # word or prefix of the line they came from (tests/test_explain_bare_messages.py):
    b"not found or cannot be loaded",
    b"FlashAttention only supports",
    b"TensorRT release",
    b"_launch_template.h",
    b"past end of file",
    b"is not defined for option",
    b"not supported on .target",
    b"cannot found",
    b"Cannot find compiler",
    b"unsatisfied condition",
    b"invalid runtime name",
    b"unresolvable CDI devices",
    b"executable file not found",
    b"fork/exec",
    b"existing device filters",
    b"stat nvidia.com/gpu",
    b"Insufficient CUDA driver",
    b"cudaGetDeviceCount returned",
    b"not yet initialized",
    b"GPL-only symbol",
    b"installed CUDA driver",
    b"busy or unavailable",
    b"kernel source tree",
    b"kernel headers for kernel",
    b"Bad return status",
    b"Driver missing function",
    b"Nouveau kernel driver",
    b"GPU access blocked",
    b"launch timed out",
    b"illegal memory access",
    b"kernel image is invalid",
    b"unable to allocate CUDA",
    b"no device code compatible",
    b"TurboQuant",
    b"are not supported for now",
    b"No available memory for the cache",
    b"support bf16",
    b"CUBLAS_STATUS",
    b"ASSERT FAILED",
    b"cannot open shared object file",
    b"Unsupported SM",
    b"runtime-hook:",
    b"too old",
    b"CPU does not have",  # ollama turning GPU inference off on a CPU without AVX, a WARN line
    b"code=222(",  # cudaErrorUnsupportedPtxVersion by number, as an old helper_cuda.h prints it
    b"supported_sm = [int(",  # torch cpp_extension's arch-list parse, context for its ValueError
)
# Lines worth handing to the fact parsers: they name drivers, GPUs, versions and images (and
# ggml_cuda_init's "found N CUDA devices", which its device-line parser needs).
FACT_ANCHORS = (b"NVIDIA", b"ersion", b"apabilit", b"ARCHS", b"docker run", b"CUDA devices")

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
# Typographic quotes (U+2018/U+2019, U+201C/U+201D) as editors and issue pages curl them made
# plain, so a signature spells "'" and '"' once; one translate pass over the line stays linear.
_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'})
_PREFIXES = re.compile(
    r"^(?:\s*(?:>\s?)+)?"  # quote marks from pasted issues
    r"(?:\s*\((?:VllmWorker|EngineCore|APIServer|EngineCore_\w*|Worker\w*|RayWorker\w*)[^)]*\)\s*)?"
    r"(?:\s*(?:ERROR|WARNING|INFO|DEBUG|CRITICAL)\s+\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?"
    r"(?:\s+\[[^\]]*\])?\s*)?"
)
_TIMESTAMP = re.compile(
    r"^\s*(?:\[?\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\]?\s+)"
)
# What a collector puts before every line: journald's and syslog's "Nov 23 20:22:01 host
# unit[pid]: " with the month in the locale's words ("5月 21 ...", "de des. 03 ...", as
# checks.facts.capture reads them), its "host unit[pid]: " alone once _TIMESTAMP took an ISO
# stamp off, docker compose's "service-1  | " and pdsh's "host: " (a host name with a digit, as
# checks.facts.capture reads it; never "nvidia0: " or "GPU0: ", nor a library's file name,
# "libcublasLt.so.12: cannot open shared object file"). Multi-line signatures anchor at the line's
# start, so they need it gone.
_COLLECTOR = re.compile(
    rf"^(?:{JOURNAL_MONTH} {{1,2}}\d{{1,2}}日? \d\d:\d\d:\d\d [\w.-]{{1,64}} [\w.@/-]{{1,64}}"
    r"(?:\[\d{1,10}\])?: "
    r"|[\w.-]{1,64} [\w.@/-]{1,64}\[\d{1,10}\]: "
    r"|[\w.-]{0,60}[-_]\d{1,4} {1,40}\| "
    r"|(?!(?i:nvidia|nvrm|gpu|cuda|device))(?![A-Za-z0-9.-]{0,62}\.(?:so|dll)\b)"
    r"(?=[A-Za-z0-9.-]{0,62}\d)[A-Za-z0-9.-]{1,63}: )"
)


@dataclass(frozen=True)
class Variant:
    """A more specific reading of a signature, used when its facts are known and `when` holds."""

    needs: tuple[str, ...]
    message: str
    fix: str | None = None
    when: str | None = None
    rule: str | None = None


@dataclass(frozen=True)
class Signature:
    """A known failure text, the rule it is evidence for, and how specific it is."""

    id: str
    rule: str
    pattern: re.Pattern[str]
    specificity: int
    message: str
    fix: str
    context: re.Pattern[str] | None = None
    window: int = 0
    variants: tuple[Variant, ...] = ()
    explains: tuple[str, ...] = ()
    unless: str | None = None


@dataclass
class Hit:
    """Every place one signature matched: the first few as evidence, and the count."""

    signature: Signature
    evidence: list[tuple[int, str]] = field(default_factory=list)
    count: int = 0
    groups: dict[str, str] = field(default_factory=dict)


@dataclass
class Scan:
    """What a scan found: hits by signature id, fact lines, and how much was read."""

    hits: dict[str, Hit] = field(default_factory=dict)
    fact_text: list[str] = field(default_factory=list)
    lines: int | None = None
    bytes: int | None = None


@functools.cache
def signatures() -> tuple[Signature, ...]:
    """Every signature in checks/logs/signatures/*.toml; refuses a bad `explains` (ValueError)."""
    out = []
    for _area, content in packaged.toml_folder("checks.logs", "signatures"):
        for raw in content["signature"]:
            out.append(
                Signature(
                    id=raw["id"],
                    rule=raw["rule"],
                    pattern=re.compile(raw["pattern"]),
                    specificity=raw["specificity"],
                    message=raw["message"],
                    fix=raw["fix"],
                    context=re.compile(raw["context"]) if "context" in raw else None,
                    window=raw.get("window", 0),
                    variants=tuple(
                        Variant(
                            needs=tuple(v.get("needs", ())),
                            message=v["message"],
                            fix=v.get("fix"),
                            when=v.get("when"),
                            rule=v.get("rule"),
                        )
                        for v in raw.get("variant", ())
                    ),
                    explains=tuple(raw.get("explains", ())),
                    unless=raw.get("unless"),
                )
            )
    check_explains(out)
    return tuple(out)


def check_explains(sigs: list[Signature] | tuple[Signature, ...]) -> None:
    """Refuse `explains` that names an unknown signature, the signature itself, or makes a cycle.

    `explains` lists the symptoms a signature's cause produces: when both hit one log, the cause
    is ranked above them, so the relation must be a DAG over known ids.
    """
    known = {s.id for s in sigs}
    for sig in sigs:
        unknown = sorted(set(sig.explains) - known)
        if unknown:
            raise ValueError(f"signature {sig.id} explains unknown signatures: {unknown}")
    closure = explained_by_closure(sigs)
    for sig in sigs:
        if sig.id in closure.get(sig.id, frozenset()):
            raise ValueError(f"signature {sig.id} explains itself (through `explains`)")


def explained_by_closure(
    sigs: list[Signature] | tuple[Signature, ...],
) -> dict[str, frozenset[str]]:
    """For each signature id, every signature that explains it, directly or through others."""
    direct: dict[str, set[str]] = {}
    for sig in sigs:
        for symptom in sig.explains:
            direct.setdefault(symptom, set()).add(sig.id)
    out: dict[str, frozenset[str]] = {}
    for symptom in direct:
        seen: set[str] = set()
        todo = list(direct[symptom])
        while todo:
            cause = todo.pop()
            if cause not in seen:
                seen.add(cause)
                todo.extend(direct.get(cause, ()))
        out[symptom] = frozenset(seen)
    return out


def clean(line: str) -> str:
    """A log line without colour codes, quote marks, timestamps, collectors' and worker/level
    prefixes, its typographic quotes made plain."""
    line = _ANSI.sub("", line).rstrip("\r\n").translate(_QUOTES)
    line = _COLLECTOR.sub("", _TIMESTAMP.sub("", line), count=1)
    return _PREFIXES.sub("", line, count=1).strip("` \t")


def _candidates(chunk: bytes, anchors: tuple[bytes, ...]) -> list[int]:
    """Start offsets of the lines in `chunk` that contain any anchor, in order."""
    starts = set()
    for anchor in anchors:
        i = chunk.find(anchor)
        while i != -1:
            start = chunk.rfind(b"\n", 0, i) + 1
            starts.add(start)
            end = chunk.find(b"\n", i)
            i = chunk.find(anchor, end if end != -1 else len(chunk))
    return sorted(starts)


def chunks(stream: BinaryIO, size: int | None = None) -> Iterator[bytes]:
    """Whole lines from `stream`, about `size` bytes at a time.

    A line longer than `size` keeps its first `size` bytes (only MAX_LINE are matched) and the
    rest is skipped up to its newline, so it still counts as one line.
    """
    size = size or CHUNK
    tail = b""
    skipping = False
    while True:
        block = stream.read(size)
        if not block:
            if tail:
                yield tail
            return
        if skipping:
            newline = block.find(b"\n")
            if newline == -1:
                continue
            block, skipping = block[newline + 1 :], False
        data = tail + block
        cut = data.rfind(b"\n") + 1
        if cut == 0:
            if len(data) < size:
                tail = data
                continue
            yield data[:size] + b"\n"
            tail, skipping = b"", True
            continue
        yield data[:cut]
        tail = data[cut:]


def _python_candidates(
    stream: BinaryIO, anchors: tuple[bytes, ...], out: Scan
) -> Iterator[tuple[int, bytes]]:
    """(line number, raw line) of every line holding an anchor, found with bytes.find per chunk."""
    lines = size = 0
    for chunk in chunks(stream):
        counted, line_no = 0, lines
        for start in _candidates(chunk, anchors):
            line_no += chunk.count(b"\n", counted, start)
            counted = start
            end = chunk.find(b"\n", start)
            yield line_no + 1, chunk[start : end if end != -1 else len(chunk)][:MAX_LINE]
        lines += chunk.count(b"\n") + (0 if chunk.endswith(b"\n") else 1)
        size += len(chunk)
    out.lines, out.bytes = lines, size


@functools.cache
def _grep() -> str | None:
    """GNU grep, whose multi-string search prefilters far faster than a loop of bytes.find."""
    path = shutil.which("grep")
    if path is None:
        return None
    try:
        version = subprocess.run([path, "--version"], capture_output=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return path if b"GNU grep" in version.stdout else None


def _grep_candidates(
    grep: str, stream: BinaryIO, anchors: tuple[bytes, ...], out: Scan
) -> Iterator[tuple[int, bytes]]:
    """The same candidates through `grep -F -n -a`, reading the stream's file descriptor."""
    argv = [grep, "-F", "-n", "-a"]
    for anchor in anchors:
        argv += ["-e", anchor.decode()]
    env = {**os.environ, "LC_ALL": "C"}
    with subprocess.Popen(argv, stdin=stream, stdout=subprocess.PIPE, env=env) as proc:
        assert proc.stdout is not None
        for raw in proc.stdout:
            number, _, line = raw.partition(b":")
            yield int(number), line.rstrip(b"\n")[:MAX_LINE]
    if proc.returncode not in (0, 1):
        raise OSError(f"grep exited {proc.returncode}")


def _has_fd(stream: BinaryIO) -> bool:
    try:
        stream.fileno()
    except (OSError, ValueError, AttributeError):
        return False
    return True


def scan(
    stream: BinaryIO, sigs: tuple[Signature, ...] | None = None, use_grep: bool = True
) -> Scan:
    """Scan a binary stream; returns the hits and the fact lines it kept.

    With GNU grep on the machine and a stream that has a file descriptor, grep finds the
    candidate lines; otherwise bytes.find does. Both give the same hits and line numbers; grep's
    path does not count the lines and bytes it skipped (`lines` and `bytes` stay None).
    """
    sigs = signatures() if sigs is None else sigs
    anchors = ANCHORS + FACT_ANCHORS
    result = Scan()
    grep = _grep() if use_grep and _has_fd(stream) else None
    if grep is not None:
        candidates = _grep_candidates(grep, stream, anchors, result)
    else:
        candidates = _python_candidates(stream, anchors, result)
    recent: list[tuple[int, str]] = []  # candidate lines, for signatures that need context
    fact_bytes = 0
    window = max((s.window for s in sigs), default=0)
    for number, raw in candidates:
        text = clean(raw.decode("utf-8", errors="replace"))
        if fact_bytes < MAX_FACT_BYTES and any(a in raw for a in FACT_ANCHORS):
            result.fact_text.append(text)
            fact_bytes += len(text)
        _match(text, number, sigs, recent, result)
        if window:
            recent.append((number, text))
            recent = [(n, t) for n, t in recent if number - n <= window]
    return result


def _match(
    text: str, number: int, sigs: tuple[Signature, ...], recent: list[tuple[int, str]], out: Scan
) -> None:
    for sig in sigs:
        found = sig.pattern.search(text)
        if found is None:
            continue
        if (
            sig.context is not None
            and not any(sig.context.search(t) for n, t in recent if number - n <= sig.window)
            and not sig.context.search(text)
        ):
            continue
        hit = out.hits.setdefault(sig.id, Hit(sig))
        hit.count += 1
        if len(hit.evidence) < EVIDENCE:
            hit.evidence.append((number, text[:300]))
        for key, value in found.groupdict().items():
            if value is not None:
                hit.groups.setdefault(key, value)
