"""llama-build.sh stops right after configuring when a CUDA build was planned and CMake enabled
no CUDA: a silent CPU-only build (nvcc missing from a service's PATH) never replaces `current`."""

from __future__ import annotations

from pathlib import Path

from provision.build import cmake_args
from tests.test_build_script import assert_untouched, build, built, fake_tarball, prefix, tools

__all__ = ["built", "prefix", "tools"]  # pytest fixtures, imported for this module's tests


def test_planned_cuda_build_fails_when_cmake_enabled_no_cuda(prefix: Path, tmp_path: Path) -> None:
    tarball = fake_tarball(tmp_path / "src")  # a CPU-only project: CMake enables no CUDA
    done = build(prefix, "cuda", ["--tarball", str(tarball)], cmake_args(()), expect="86")
    assert done.returncode != 0
    assert "CMake enabled no CUDA compiler" in done.stderr
    assert "building llama-server" not in done.stdout  # it stopped before compiling
    assert_untouched(prefix, "cuda", "first")


def test_cpu_build_without_expected_archs_still_builds(prefix: Path, tmp_path: Path) -> None:
    tarball = fake_tarball(tmp_path / "src")
    done = build(prefix, "cpu", ["--tarball", str(tarball)], cmake_args(()))
    assert done.returncode == 0, done.stdout + done.stderr
    assert (prefix / "builds" / "cpu" / ".complete").is_file()
