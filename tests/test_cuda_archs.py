"""The CUDA architectures derived for a host's GPUs produce exactly the cubins the build expects.

Real: nvcc, cmake, cuobjdump, `recommend.cuda_architectures`, `provision.build.cmake_args` and
the llama-build.sh script. Stand-in: a tiny CUDA project (one kernel, a `llama-server` target)
in place of llama.cpp, and GPU facts written here; no GPU is needed or used (nothing runs on one).
"""

from __future__ import annotations

import glob
import importlib.metadata
import os
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from checks.facts.model import Gpu, HostFacts
from checks.reporting import recommend
from provision.build import Build, cmake_args
from tests.test_build_script import assert_untouched, build, fake_source, fake_tarball, require

# GPUs on a host -> the cubins its build must hold.
HOSTS = {
    "8.6": {"sm_86"},
    "8.9": {"sm_89"},
    "9.0": {"sm_90a"},
    "12.0": {"sm_120a"},
    "12.1": {"sm_121a"},
    "8.6+12.0": {"sm_86", "sm_120a"},
}
VIRTUAL = ("89-real", "86-virtual")


def find_nvcc() -> str | None:
    found = os.environ.get("CUDACXX") or shutil.which("nvcc")
    return found or next(iter(sorted(glob.glob("/usr/local/cuda*/bin/nvcc"))), None)


def find_cuobjdump(nvcc: str) -> str | None:
    """cuobjdump from the nvidia-cuda-cuobjdump package, else PATH, else next to nvcc."""
    try:
        files = importlib.metadata.files("nvidia-cuda-cuobjdump") or []
    except importlib.metadata.PackageNotFoundError:
        files = []
    for f in files:
        if f.name == "cuobjdump":
            return str(f.locate())
    beside = Path(nvcc).resolve().parent / "cuobjdump"
    return shutil.which("cuobjdump") or (str(beside) if beside.is_file() else None)


def facts(host: str) -> HostFacts:
    gpus = [Gpu(index=i, compute_capability=cc) for i, cc in enumerate(host.split("+"))]
    return HostFacts(gpus=gpus)


def archs_of(host: str) -> tuple[str, ...]:
    archs = recommend.cuda_architectures(facts(host))
    assert archs, host
    return tuple(archs)


def listed(cuobjdump: str, what: str, binary: Path) -> set[str]:
    """The sm_XX names in `cuobjdump --list-elf|--list-ptx` of a binary."""
    done = subprocess.run(
        [cuobjdump, f"--list-{what}", str(binary)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0 or "does not contain" in done.stderr, done.stderr
    return set(re.findall(r"\.(sm_\d+[af]?)\.(?:cubin|ptx)\b", done.stdout))


@pytest.fixture(scope="module")
def tools() -> tuple[str, str]:
    """(nvcc, cuobjdump)."""
    require("cmake", "c++", "tar", "flock")
    nvcc = find_nvcc()
    cuobjdump = find_cuobjdump(nvcc) if nvcc else None
    if not nvcc or not cuobjdump:
        reason = "needs nvcc" if not nvcc else "needs cuobjdump"
        if os.environ.get("GPUPROV_E2E") == "required":
            pytest.fail(reason)
        pytest.skip(reason)
    return nvcc, cuobjdump


def cmake_build(src: Path, out: Path, args: tuple[str, ...], nvcc: str) -> Path:
    """Configure and build the stand-in with `args` (plus the nvcc to use); the binary."""
    for step in (
        ["cmake", "-S", str(src), "-B", str(out), *args, f"-DCMAKE_CUDA_COMPILER={nvcc}"],
        ["cmake", "--build", str(out), "--target", "llama-server"],
    ):
        done = subprocess.run(step, capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
    return out / "bin" / "llama-server"


@pytest.fixture(scope="module")
def binaries(
    tools: tuple[str, str], tmp_path_factory: pytest.TempPathFactory
) -> dict[tuple[str, ...], Path]:
    """The stand-in built for each host's archs (and VIRTUAL), two builds at a time."""
    root = tmp_path_factory.mktemp("archs")
    src = fake_source(root, cuda=True)
    sets = [archs_of(host) for host in HOSTS] + [VIRTUAL]
    with ThreadPoolExecutor(max_workers=2) as pool:
        built = pool.map(
            lambda a: cmake_build(src, root / "-".join(a), cmake_args(a), tools[0]), sets
        )
        return dict(zip(sets, built, strict=True))


@pytest.mark.parametrize("host", list(HOSTS))
def test_cubins_match_expected_archs(
    host: str, binaries: dict[tuple[str, ...], Path], tools: tuple[str, str]
) -> None:
    archs = archs_of(host)
    expect = Build("t", archs, cmake_args(archs)).expect_archs
    cubins = listed(tools[1], "elf", binaries[archs])
    assert cubins == {f"sm_{a}" for a in expect} == HOSTS[host]


def test_blackwell_gets_the_a_target(binaries: dict[tuple[str, ...], Path]) -> None:
    assert archs_of("12.0") == ("120a",)
    assert "-DCMAKE_CUDA_ARCHITECTURES=120a" in cmake_args(archs_of("12.0"))


def test_virtual_entry_is_ptx_only(
    binaries: dict[tuple[str, ...], Path], tools: tuple[str, str]
) -> None:
    assert Build("t", VIRTUAL, cmake_args(VIRTUAL)).expect_archs == ("89",)
    assert listed(tools[1], "elf", binaries[VIRTUAL]) == {"sm_89"}
    assert listed(tools[1], "ptx", binaries[VIRTUAL]) == {"sm_86"}


@pytest.fixture(scope="module")
def script_env(tools: tuple[str, str]) -> dict[str, str]:
    """The script finds cuobjdump on PATH; CMake gets nvcc from CUDACXX."""
    path = f"{Path(tools[1]).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return {**os.environ, "PATH": path, "CUDACXX": tools[0]}


@pytest.fixture(scope="module")
def cuda_prefix(
    script_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, Path]:
    """(prefix, tarball): a CUDA stand-in built by the script for 86, `current` -> sm86."""
    root = tmp_path_factory.mktemp("script")
    tarball = fake_tarball(root / "src", cuda=True)
    archs = ("86",)
    expect = " ".join(Build("t", archs, cmake_args(archs)).expect_archs)
    done = build(
        root / "prefix", "sm86", ["--tarball", str(tarball)], cmake_args(archs), expect, script_env
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return root / "prefix", tarball


def test_script_checks_expected_archs(cuda_prefix: tuple[Path, Path]) -> None:
    prefix, _ = cuda_prefix
    assert os.readlink(prefix / "current") == "builds/sm86"
    assert "sm_86.cubin" in (prefix / "builds" / "sm86" / "cubins.txt").read_text()


def test_script_fails_on_missing_arch(
    cuda_prefix: tuple[Path, Path], script_env: dict[str, str]
) -> None:
    prefix, tarball = cuda_prefix
    done = build(
        prefix, "sm86-89", ["--tarball", str(tarball)], cmake_args(("86",)), "86 89", script_env
    )
    assert done.returncode != 0
    assert "no sm_89 code" in done.stderr
    assert_untouched(prefix, "sm86-89", "sm86")
