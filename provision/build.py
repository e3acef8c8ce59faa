"""How llama.cpp is built for a host: CMake arguments from its GPUs, and the build's name.

A build's name hashes its source and its arguments, so a changed ref, architecture or flag makes
a new build directory and an unchanged one is never rebuilt.
"""

from __future__ import annotations

import functools
import hashlib
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from checks.facts.model import HostFacts
from checks.reporting import recommend
from provision.stack import Stack

SCRIPT = "/usr/local/lib/gpuprov/llama-build.sh"
TARBALLS = "/var/cache/gpuprov/sources"


class BuildError(ValueError):
    """The build cannot be planned (e.g. a GPU's compute capability is unknown)."""


@dataclass(frozen=True)
class Build:
    """One planned build of llama-server."""

    name: str
    archs: tuple[str, ...]
    cmake_args: tuple[str, ...]
    tarball_remote: str = ""

    @property
    def cuda(self) -> bool:
        return bool(self.archs)

    @property
    def expect_archs(self) -> tuple[str, ...]:
        """Real (cubin) architectures the binary must contain; '-virtual' ones are PTX only."""
        return tuple(a.removesuffix("-real") for a in self.archs if not a.endswith("-virtual"))


def architectures(stack: Stack, facts: HostFacts) -> tuple[str, ...]:
    """The stack's explicit architectures, else those the host's GPUs need ('' = CPU-only).

    A host whose driver is installed but broken lists no GPU without being CPU-only: without
    explicit architectures its build cannot be planned.
    """
    if stack.cuda_architectures:
        return tuple(stack.cuda_architectures.split(";"))
    if fault := recommend.broken_driver(facts):
        raise BuildError(
            f"the NVIDIA driver is broken ({fault.rule}: {fault.title}), so the GPUs are unknown "
            f"and a CPU-only build would be wrong: fix the driver as {fault.rule} says, or set "
            "llama_cpp_cuda_architectures"
        )
    archs = recommend.cuda_architectures(facts)
    if archs is None:
        raise BuildError("a GPU's compute capability is unknown: set llama_cpp_cuda_architectures")
    return tuple(archs)


def cmake_args(archs: tuple[str, ...], extra: tuple[str, ...] = ()) -> tuple[str, ...]:
    """Arguments for `cmake -S src -B build`: static, release, no native tuning, CUDA if archs."""
    args = [
        "-DCMAKE_BUILD_TYPE=Release",
        "-DBUILD_SHARED_LIBS=OFF",
        "-DGGML_NATIVE=OFF",
        "-DLLAMA_BUILD_TESTS=OFF",
        "-DLLAMA_BUILD_EXAMPLES=OFF",
    ]
    if archs:
        args += ["-DGGML_CUDA=ON", f"-DCMAKE_CUDA_ARCHITECTURES={';'.join(archs)}"]
    else:
        args.append("-DGGML_CUDA=OFF")
    return (*args, *extra)


@functools.cache
def _sha256(path: str, size: int, mtime: float) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def file_sha256(path: str) -> str:
    st = Path(path).stat()
    return _sha256(path, st.st_size, st.st_mtime)


def plan(stack: Stack, facts: HostFacts, nvcc: str = "") -> Build:
    """The build for this host; `nvcc` pins CMake's CUDA compiler for a CUDA build."""
    archs = architectures(stack, facts)
    compiler = (f"-DCMAKE_CUDA_COMPILER={nvcc}",) if archs and nvcc else ()
    args = cmake_args(archs, compiler + stack.cmake_args)
    src = stack.source
    if src.tarball:
        sha = file_sha256(src.tarball)
        identity = f"tarball:{sha}:{src.tarball_subdir}"
        label = re.sub(r"[^A-Za-z0-9.-]+", "-", Path(src.tarball).name.split(".tar")[0])[:40]
        remote = f"{TARBALLS}/{sha[:16]}.tar.gz"
    else:
        identity = f"git:{src.git_url}:{src.ref}"
        label = re.sub(r"[^A-Za-z0-9.-]+", "-", src.ref)[:40]
        remote = ""
    key = hashlib.sha256("\n".join((identity, *args)).encode()).hexdigest()[:12]
    return Build(name=f"{label}-{key}", archs=archs, cmake_args=args, tarball_remote=remote)


def command(stack: Stack, build: Build, ccache_dir: str) -> list[str]:
    """argv of the build script on the host."""
    argv = [SCRIPT, "--prefix", stack.prefix, "--name", build.name]
    if build.tarball_remote:
        argv += ["--tarball", build.tarball_remote]
        if stack.source.tarball_subdir:
            argv += ["--subdir", stack.source.tarball_subdir]
    else:
        argv += ["--git-url", stack.source.git_url, "--ref", stack.source.ref]
    if stack.build_jobs:
        argv += ["--jobs", str(stack.build_jobs)]
    if ccache_dir:
        argv += ["--ccache-dir", ccache_dir]
    if build.expect_archs:
        argv += ["--expect-archs", " ".join(build.expect_archs)]
    return [*argv, "--", *build.cmake_args]


_BUILD_NAME = re.compile(r"[A-Za-z0-9][\w.+-]{0,200}")


def list_builds_command(prefix: str) -> str:
    """The builds under `prefix`, newest first, and `current`'s target on the last line."""
    builds = shlex.quote(f"{prefix}/builds")
    current = shlex.quote(f"{prefix}/current")
    return f'ls -1t {builds} 2>/dev/null; echo "current=$(readlink {current} 2>/dev/null)"'


def prunable(listed: list[str], planned: str, keep: int) -> list[str]:
    """Builds to remove so that the newest `keep` remain: `listed` is list_builds_command's
    output; the planned build counts as the newest, and the one `current` points at is kept."""
    current = ""
    names: list[str] = []
    for line in listed:
        text = line.strip()
        if text.startswith("current="):
            current = text.removeprefix("current=").rstrip("/").removeprefix("builds/")
        elif _BUILD_NAME.fullmatch(text) and text not in names:
            names.append(text)
    order = [planned, *(n for n in names if n != planned)]
    kept = set(order[: max(keep, 1)]) | {planned, current}
    return [n for n in names if n not in kept]


def cuda_repo(os_id: str | None, os_version: str | None, machine: str | None) -> str:
    """NVIDIA's apt repository folder for a host, e.g. 'ubuntu2404/x86_64' or 'debian12/sbsa'."""
    if os_id not in ("ubuntu", "debian") or not os_version:
        raise BuildError(f"no NVIDIA CUDA apt repository for {os_id} {os_version}")
    arch = {"x86_64": "x86_64", "aarch64": "sbsa", "arm64": "sbsa"}.get(machine or "")
    if arch is None:
        raise BuildError(f"no NVIDIA CUDA apt repository for {machine}")
    return f"{os_id}{os_version.replace('.', '')}/{arch}"


def cuda_keyring_command(repo: str) -> str:
    """Install NVIDIA's cuda-keyring package (signs the CUDA apt repository)."""
    url = f"https://developer.download.nvidia.com/compute/cuda/repos/{repo}/cuda-keyring_1.1-1_all.deb"
    # A private folder (mktemp -d, mode 700): root never writes through a path others can plant.
    return (
        'd="$(mktemp -d)" && trap \'rm -rf "$d"\' EXIT && '
        f'curl -fsSL -o "$d/cuda-keyring.deb" {shlex.quote(url)} && dpkg -i "$d/cuda-keyring.deb"'
    )
