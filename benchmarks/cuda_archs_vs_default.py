"""ggml-cuda compiled for the architectures gpuprov derives against llama.cpp's default list.

The llama_cpp role sets CMAKE_CUDA_ARCHITECTURES from the host's GPUs (one compute capability,
8.6 by default here, gives "86"); without it a non-native build compiles llama.cpp's default
list, read from the vendored ggml/src/ggml-cuda/CMakeLists.txt for this nvcc's version (13.0:
75-virtual 80-virtual 86-real 89-real 90-virtual 120a-real 121a-real). Both lists become nvcc
--generate-code flags the way CMake writes them; the rest of each command (defines, includes,
flags) comes from compile_commands.json of one CMake configure of the vendored tree with the
role's arguments less the architectures, so the configure also shows CMake's own flags for the
default list, which must equal the parsed list's. Sources compile one at a time (-j1); after
one warm-up compile of arange.cu per variant, each of --runs rounds compiles the set with one
variant, then the other. Prints each variant's median wall time for the set (and its CPU time,
steadier on a shared machine), the ratio default/derived, and whether the derived build is at
least 5 times faster, then each source's medians.

The sources: of the 144 .cu files a default build of llama-cpp-python 0.3.36 compiles, about
half are ordinary kernels and the rest template instances (22 mmq, 37 fattn, 16 mmf). The set
is five ordinary kernels every model runs, from light (norm, rope, softmax) to template-heavy
host code (getrows, binbcast), the mmq instance for Q4_K (the quantization most GGUF files use)
and one fattn-mma-f16 instance (the largest fattn family, the one Turing and newer run).
--quick compiles arange.cu alone.

    .venv/bin/python benchmarks/cuda_archs_vs_default.py --runs 3
    .venv/bin/python benchmarks/cuda_archs_vs_default.py --cc 12.0 --quick

Needs cmake, an nvcc (--nvcc, default the one on PATH), the llama-cpp-python sdist of the
end-to-end tests (--sdist, default in gpuprov's test host cache) and the cuBLAS headers, which
ggml-cuda includes: from the toolkit, else from NVIDIA's nvidia-cublas wheel (--cublas, default
in the same cache). The error says how to download whichever is missing.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from checks.facts.model import Gpu, HostFacts  # noqa: E402
from checks.facts.parsers.nvcc import parse_nvcc  # noqa: E402
from checks.reporting import recommend  # noqa: E402
from provision import build  # noqa: E402
from provision.testhost.state import state_dir  # noqa: E402
from tests.e2e.conftest import SDIST  # noqa: E402

GOAL = 5.0
SOURCES = (
    "binbcast.cu",
    "getrows.cu",
    "norm.cu",
    "rope.cu",
    "softmax.cu",
    "template-instances/mmq-instance-q4_k.cu",
    "template-instances/fattn-mma-f16-instance-ncols1_8-ncols2_4.cu",
)
QUICK = ("arange.cu",)
CUDA_DIR = "ggml/src/ggml-cuda"
CUBLAS_HEADER = "cublas_v2.h"

_COMMENT = re.compile(r'("(?:\\.|[^"\\])*")|#[^\n]*')
_COMMAND = re.compile(r'([A-Za-z_]\w*)[ \t]*\(((?:"(?:\\.|[^"\\])*"|\([^()]*\)|[^()"])*)\)')
_ARCH = re.compile(r"^\d+[af]?(-real|-virtual)?$")
_VERSION_OPS = {
    "VERSION_LESS": lambda a, b: a < b,
    "VERSION_LESS_EQUAL": lambda a, b: a <= b,
    "VERSION_EQUAL": lambda a, b: a == b,
    "VERSION_GREATER_EQUAL": lambda a, b: a >= b,
    "VERSION_GREATER": lambda a, b: a > b,
}


def cmake_version(text: str) -> tuple[int, ...] | None:
    """A version's integer components; CMake compares them with missing ones as 0."""
    parts = text.split(".")
    return tuple(int(p) for p in parts) if all(p.isdigit() for p in parts) else None


def _commands(text: str) -> list[tuple[str, list[str]]]:
    """CMake commands in order, each (lower-case name, arguments with quotes and ';' split)."""
    text = _COMMENT.sub(lambda m: m.group(1) or "", text)
    out = []
    for match in _COMMAND.finditer(text):
        args = [a for token in match.group(2).split() for a in token.strip('"').split(";") if a]
        out.append((match.group(1).lower(), args))
    return out


def _condition(args: list[str], cuda: tuple[int, ...]) -> bool | None:
    """`CUDAToolkit_VERSION VERSION_<OP> "X"` terms joined by AND; None for anything else."""
    terms = " ".join(args).split(" AND ")
    result = True
    for term in terms:
        words = term.split()
        if len(words) != 3 or words[0] != "CUDAToolkit_VERSION" or words[1] not in _VERSION_OPS:
            return None
        other = cmake_version(words[2])
        if other is None:
            return None
        width = max(len(cuda), len(other))
        pad = (cuda + (0,) * width)[:width], (other + (0,) * width)[:width]
        result = result and _VERSION_OPS[words[1]](*pad)
    return result


def _non_native_branch(
    commands: list[tuple[str, list[str]]],
) -> list[tuple[str, list[str]]] | None:
    """The commands of the `else()` of llama.cpp's `if (GGML_NATIVE ...)`."""
    start = next((i for i, (n, a) in enumerate(commands) if n == "if" and "GGML_NATIVE" in a), None)
    if start is None:
        return None
    depth, branch = 0, None
    for i in range(start + 1, len(commands)):
        name = commands[i][0]
        if name == "if":
            depth += 1
        elif name == "endif" and depth > 0:
            depth -= 1
        elif name == "endif":
            return None if branch is None else commands[branch:i]
        elif name == "elseif" and depth == 0:
            return None
        elif name == "else" and depth == 0:
            branch = i + 1
    return None


def default_architectures(cmake_text: str, cuda_version: str) -> list[str] | None:
    """llama.cpp's CMAKE_CUDA_ARCHITECTURES for a non-native build with this CUDA, from
    ggml-cuda's CMakeLists.txt; None when the file says it in a way this does not follow."""
    cuda = cmake_version(cuda_version)
    branch = _non_native_branch(_commands(cmake_text))
    if cuda is None or branch is None:
        return None
    archs: list[str] = []
    frames: list[list[bool]] = []  # per open if: [enclosing active, a branch was taken]
    active = True
    for name, args in branch:
        if name in ("if", "elseif"):
            cond = _condition(args, cuda)
            if cond is None or (name == "elseif" and not frames):
                return None
            if name == "if":
                frames.append([active, False])
            parent, taken = frames[-1]
            active = parent and not taken and cond
            frames[-1][1] = taken or cond
        elif name in ("else", "endif") and not frames:
            return None
        elif name == "else":
            parent, taken = frames[-1]
            active = parent and not taken
            frames[-1][1] = True
        elif name == "endif":
            active = frames.pop()[0]
        elif "CMAKE_CUDA_ARCHITECTURES" in args and active:
            if name == "list" and args[:2] == ["APPEND", "CMAKE_CUDA_ARCHITECTURES"]:
                archs += args[2:]
            elif name == "set" and args[:1] == ["CMAKE_CUDA_ARCHITECTURES"]:
                archs = args[1:]
            else:
                return None
    if frames or not archs or not all(_ARCH.match(a) for a in archs):
        return None
    return archs


def gencode(archs: list[str]) -> list[str]:
    """nvcc flags for CMAKE_CUDA_ARCHITECTURES entries, as CMake writes them: NN-real is sm code,
    NN-virtual compute (PTX), plain NN both."""
    flags = []
    for arch in archs:
        if not _ARCH.match(arch):
            raise ValueError(f"not a CMake CUDA architecture: {arch!r}")
        name, _, kind = arch.partition("-")
        codes = [f"compute_{name}"] if kind != "real" else []
        codes += [f"sm_{name}"] if kind != "virtual" else []
        flags.append(f"--generate-code=arch=compute_{name},code=[{','.join(codes)}]")
    return flags


def derived_architectures(cc: str) -> list[str] | None:
    """What the llama_cpp role builds for one GPU of compute capability `cc` ("8.6" -> ["86"])."""
    return recommend.cuda_architectures(HostFacts(gpus=[Gpu(compute_capability=cc)]))


def sources_dir() -> Path:
    return state_dir() / "sources"


def default_sdist() -> Path:
    name, _, version = SDIST.partition("==")
    return sources_dir() / f"{name.replace('-', '_')}-{version}.tar.gz"


def find_nvcc() -> str | None:
    found = shutil.which("nvcc")
    if found:
        return found
    toolkits = sorted(Path("/usr/local").glob("cuda*/bin/nvcc"))
    return str(toolkits[-1]) if toolkits else None


def _nvcc_includes(nvcc: str) -> list[Path]:
    """The include directories nvcc itself adds (its toolkit's), from `nvcc --dryrun`."""
    argv = [nvcc, "--dryrun", "-x", "cu", "-c", "/dev/null", "-o", "/dev/null"]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    dirs = []
    for line in done.stderr.splitlines():
        _, found, value = line.partition("#$ INCLUDES=")
        if not found:
            _, found, value = line.partition("#$ SYSTEM_INCLUDES=")
        words = shlex.split(value) if found else []
        dirs += [Path(w[2:]) for w in words if w.startswith("-I") and len(w) > 2]
        dirs += [Path(b) for a, b in itertools.pairwise(words) if a in ("-I", "-isystem")]
    return dirs


@dataclass(frozen=True)
class Tools:
    """What the benchmark runs with. `cublas` is a wheel or a header folder, or None when the
    toolkit has the cuBLAS headers itself."""

    nvcc: str
    release: str
    version: str
    sdist: Path
    cublas: Path | None


def tools(nvcc: str | None, sdist: Path, cublas: Path | None) -> Tools | str:
    """The tools found, or what is missing here and how to get it."""
    if not nvcc or shutil.which(nvcc) is None:
        return f"no nvcc at {nvcc}: pass --nvcc" if nvcc else "no nvcc found: pass --nvcc"
    done = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=False)
    toolkits = parse_nvcc(done.stdout).toolkits
    if not toolkits or not toolkits[0].release or not toolkits[0].version:
        return f"{nvcc} --version names no CUDA release"
    release, version = toolkits[0].release, toolkits[0].version
    if not sdist.is_file():
        return (
            f"no sdist at {sdist}; download it (as tests/e2e/conftest.py does) with\n"
            f"  python3 -m pip download --no-deps --no-binary :all: -d {sdist.parent} '{SDIST}'"
        )
    if any((d / CUBLAS_HEADER).is_file() for d in _nvcc_includes(nvcc)):
        return Tools(nvcc, release, version, sdist, None)
    if cublas is None:
        wheels = sorted(sources_dir().glob(f"nvidia_cublas*-{release}.*-py3-none-*.whl"))
        cublas = wheels[-1] if wheels else None
    if cublas is None or not cublas.exists():
        major = release.split(".")[0]
        package = "nvidia-cublas" if int(major) >= 13 else f"nvidia-cublas-cu{major}"
        return (
            f"{CUBLAS_HEADER} is not in {nvcc}'s include path (ggml-cuda includes it): install "
            "the toolkit's cuBLAS development files, or download NVIDIA's wheel with\n"
            f"  python3 -m pip download --no-deps --only-binary :all: -d {sources_dir()} "
            f"'{package}=={release}.*'\n"
            "or pass --cublas WHEEL_OR_DIR"
        )
    return Tools(nvcc, release, version, sdist, cublas)


@dataclass(frozen=True)
class Compile:
    """One source's nvcc command from compile_commands.json, without its architecture flags."""

    source: str
    directory: str
    argv: tuple[str, ...]
    cmake_archs: tuple[str, ...]

    def command(self, archs: list[str], extra: list[str], output: Path) -> list[str]:
        argv = list(self.argv)
        argv[argv.index("-o") + 1] = str(output)
        return [argv[0], *extra, *argv[1:-1], *gencode(archs), argv[-1]]


def compile_commands(build_dir: Path, sources: tuple[str, ...]) -> list[Compile]:
    entries = json.loads((build_dir / "compile_commands.json").read_text())
    out = []
    for source in sources:
        suffix = f"/{CUDA_DIR}/{source}"
        entry = next((e for e in entries if e["file"].endswith(suffix)), None)
        if entry is None:
            raise SystemExit(f"CMake compiles no {CUDA_DIR}/{source}")
        argv = shlex.split(entry["command"])
        archs = tuple(a for a in argv if a.startswith("--generate-code="))
        rest = [a for a in argv if not a.startswith("--generate-code=")]
        # the source goes last: Compile.command puts the architectures just before it
        rest.remove(entry["file"])
        out.append(Compile(source, entry["directory"], (*rest, entry["file"]), archs))
    return out


def configure(src: Path, build_dir: Path, nvcc: str, derived: list[str]) -> None:
    """The role's CMake arguments less CMAKE_CUDA_ARCHITECTURES: llama.cpp picks its default.

    A toolkit without cuBLAS fails CMake's generate step on the missing CUDA::cublas target,
    after compile_commands.json is written: nothing is linked here, so that is enough.
    """
    args = [a for a in build.cmake_args(tuple(derived)) if "CMAKE_CUDA_ARCHITECTURES" not in a]
    argv = ["cmake", "-S", str(src), "-B", str(build_dir), *args]
    argv += [f"-DCMAKE_CUDA_COMPILER={nvcc}", "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON"]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if not (build_dir / "compile_commands.json").is_file():
        raise SystemExit(f"cmake configure failed:\n{(done.stdout + done.stderr)[-3000:]}")


def extract(sdist: Path, dest: Path) -> Path:
    """The sdist's vendored llama.cpp tree."""
    subprocess.run(
        ["tar", "-xzf", str(sdist), "-C", str(dest), "--wildcards", "*/vendor/llama.cpp/*"],
        check=True,
    )
    found = sorted(dest.glob(f"*/vendor/llama.cpp/{CUDA_DIR}/CMakeLists.txt"))
    if not found:
        raise SystemExit(f"{sdist} holds no vendor/llama.cpp/{CUDA_DIR}")
    return found[0].parents[3]


def cublas_include(path: Path, dest: Path) -> Path:
    """A directory holding the cuBLAS headers: `path` itself, or its wheel's include/ extracted."""
    if path.is_dir():
        return path
    dest.mkdir()
    with zipfile.ZipFile(path) as wheel:
        for name in wheel.namelist():
            if "/include/" in name and name.endswith(".h"):
                (dest / Path(name).name).write_bytes(wheel.read(name))
    return dest


@dataclass(frozen=True)
class Sample:
    wall: float
    cpu: float


def run_compile(unit: Compile, archs: list[str], extra: list[str], output: Path) -> Sample:
    """Wall and CPU seconds of one compile (CPU time stays honest on a shared machine)."""
    argv = unit.command(archs, extra, output)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=unit.directory, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"nvcc failed on {unit.source}:\n{done.stderr[-3000:]}")
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return Sample(wall, cpu)


def report(per_source: dict[str, dict[str, list[Sample]]], note: str) -> float:
    """Print each variant's median time for the whole set, the ratio default/derived with the
    goal's verdict, then each source's median wall times and ratio; returns the wall ratio."""
    names = list(next(iter(per_source.values())))
    rounds: dict[str, list[tuple[Sample, ...]]]
    rounds = {n: list(zip(*(s[n] for s in per_source.values()), strict=True)) for n in names}
    wall = {n: [sum(x.wall for x in r) for r in rs] for n, rs in rounds.items()}
    cpu = {n: statistics.median(sum(x.cpu for x in r) for r in rs) for n, rs in rounds.items()}
    medians = {n: statistics.median(values) for n, values in wall.items()}
    for name, values in wall.items():
        spread = f"{min(values):.1f}-{max(values):.1f}"
        print(
            f"{name:20} median {medians[name]:6.1f} s  (range {spread} s, CPU {cpu[name]:.1f} s, "
            f"{note})"
        )
    derived, default = names
    ratio = medians[default] / medians[derived]
    verdict = "meets" if ratio >= GOAL else "misses"
    print(
        f"ratio default/derived = {ratio:.2f} ({verdict} the goal of {GOAL:g} or more; "
        f"CPU time {cpu[default] / cpu[derived]:.2f})"
    )
    for source, samples in per_source.items():
        ours, theirs = (statistics.median(x.wall for x in samples[n]) for n in names)
        print(f"  {Path(source).name:48} {ours:6.1f} s {theirs:6.1f} s  x{theirs / ours:.2f}")
    return ratio


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cc", default="8.6", help="compute capability of the one GPU (8.6)")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help=f"compile {QUICK[0]} only")
    parser.add_argument("--nvcc", default=find_nvcc())
    parser.add_argument("--sdist", type=Path, default=default_sdist())
    parser.add_argument("--cublas", type=Path, help="nvidia-cublas wheel or a header directory")
    args = parser.parse_args()
    found = tools(args.nvcc, args.sdist, args.cublas)
    if isinstance(found, str):
        raise SystemExit(found)
    derived = derived_architectures(args.cc)
    if not derived:
        raise SystemExit(f"no architectures for compute capability {args.cc!r}")
    sources = QUICK if args.quick else SOURCES
    with tempfile.TemporaryDirectory() as tmp:
        src = extract(found.sdist, Path(tmp))
        cmake_text = (src / CUDA_DIR / "CMakeLists.txt").read_text()
        default = default_architectures(cmake_text, found.version)
        if default is None:
            raise SystemExit(
                f"cannot read llama.cpp's default CUDA architectures for CUDA {found.version} "
                f"from {CUDA_DIR}/CMakeLists.txt in {found.sdist.name}"
            )
        configure(src, Path(tmp) / "build", found.nvcc, derived)
        warm, *units = compile_commands(Path(tmp) / "build", QUICK + sources)
        for unit in units:
            if list(unit.cmake_archs) != gencode(default):
                raise SystemExit(
                    f"CMake compiles {unit.source} with {' '.join(unit.cmake_archs)}, not the "
                    f"parsed default list's {' '.join(gencode(default))}"
                )
        extra = []
        if found.cublas is not None:
            extra = ["-isystem", str(cublas_include(found.cublas, Path(tmp) / "cublas"))]
        variants = {
            f"derived {';'.join(derived)}": derived,
            f"default ({len(default)} archs)": default,
        }
        print(f"nvcc {found.version}, compute capability {args.cc}, -j1")
        print(f"default architectures: {';'.join(default)}")
        output = Path(tmp) / "out.o"
        for archs in variants.values():
            run_compile(warm, archs, extra, output)
        per_source: dict[str, dict[str, list[Sample]]] = {
            u.source: {name: [] for name in variants} for u in units
        }
        for _ in range(args.runs):
            for name, archs in variants.items():
                for unit in units:
                    per_source[unit.source][name].append(run_compile(unit, archs, extra, output))
    report(per_source, f"{args.runs} runs, {len(units)} sources")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
