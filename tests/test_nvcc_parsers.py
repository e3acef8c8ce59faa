"""The nvcc probe and parsers: real captures, probe sections, and the probe run on this machine."""

from __future__ import annotations

import shutil

import pytest

from checks.facts.parsers import nvcc
from tests.conftest import FIXTURES, REAL, sh


def test_detects_real_captures() -> None:
    for path in [*REAL.glob("nvcc_version__*"), *(FIXTURES / "captures" / "nvcc").glob("*.txt")]:
        assert nvcc.detect_nvcc(path.read_text()), path.name


def test_detect_ignores_other_text() -> None:
    assert not nvcc.detect_nvcc("compute capability 8.6\nnvidia-smi\n")


def test_source_is_the_toolkit_root() -> None:
    text = (
        "### gpuprov:nvcc dir /usr/local/cuda-12.4/bin/nvcc\n"
        "Cuda compilation tools, release 12.4, V12.4.131\n"
    )
    (toolkit,) = nvcc.parse_nvcc(text).toolkits
    assert (toolkit.source, toolkit.path, toolkit.version) == (
        "/usr/local/cuda-12.4",
        "/usr/local/cuda-12.4/bin/nvcc",
        "12.4.131",
    )


@pytest.mark.skipif(not shutil.which("nvcc"), reason="needs nvcc")
def test_probe_runs_here() -> None:
    (probe,) = nvcc.PROBES
    facts = probe.parse(sh(probe.command))
    by_path = {t.path: t for t in facts.toolkits}
    assert len(by_path) == len(facts.toolkits), "deduplicated by resolved path"
    if "/usr/local/cuda-13.0/bin/nvcc" in by_path:
        toolkit = by_path["/usr/local/cuda-13.0/bin/nvcc"]
        assert toolkit.release == "13.0"
        assert toolkit.source is not None and toolkit.source.startswith("/usr/local/cuda-13.0")
        assert toolkit.gpu_archs is not None and toolkit.gpu_archs[0] == "compute_75"
    assert any("PATH" in (t.source or "") for t in facts.toolkits)


def test_a_path_wrapper_folds_into_its_toolkit() -> None:
    """/usr/local/bin/nvcc as a wrapper script shows the same banner as the toolkit's nvcc."""
    banner = (FIXTURES / "real" / "nvcc_version__katago-pr1115_13.0-list-gpu-arch.txt").read_text()
    text = (
        f"### gpuprov:nvcc PATH /usr/local/bin/nvcc\n{banner}"
        f"### gpuprov:nvcc dir /usr/local/cuda-13.0/bin/nvcc\n{banner}"
        f"### gpuprov:nvcc dir /opt/cuda-12.8/bin/nvcc\n"
        "Cuda compilation tools, release 12.8, V12.8.93\n"
        '{"cuda" : {"name" : "CUDA SDK", "version" : "12.8.1"}}\n'
    )
    toolkits = nvcc.parse_nvcc(text).toolkits
    assert [t.path for t in toolkits] == [
        "/usr/local/cuda-13.0/bin/nvcc",
        "/opt/cuda-12.8/bin/nvcc",
    ]
    assert toolkits[0].source == "/usr/local/cuda-13.0 (on PATH as /usr/local/bin/nvcc)"
    assert toolkits[1].update == "12.8.1"


def test_cmake_4_names_the_host_compiler_after_the_cuda_compiler() -> None:
    """CMake 4.4.3 on an H100 VM (tests/fixtures/recorded/h100-vm/llama_build_log__*)."""
    text = (
        "-- The CUDA compiler identification is NVIDIA 13.0.88 with host compiler GNU 13.3.0\n"
        "-- Detecting CUDA compiler ABI info\n"
        "-- Check for working CUDA compiler: /usr/local/cuda-13.0/bin/nvcc - skipped\n"
    )
    assert nvcc.detect_cmake_cuda(text)
    (toolkit,) = nvcc.parse_cmake_cuda(text).toolkits
    assert (toolkit.version, toolkit.path) == ("13.0.88", "/usr/local/cuda-13.0/bin/nvcc")
    assert not nvcc.detect_cmake_cuda(text.replace("NVIDIA 13.0.88", "NVIDIA 13.0.88junk"))
