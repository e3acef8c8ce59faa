"""llama.cpp start-up output, --version, CMake records, and the llama.cpp probe run here."""

from __future__ import annotations

import os
from pathlib import Path

from checks.facts.parsers import llamacpp
from tests.conftest import REAL, sh


def test_detects_real_logs() -> None:
    for path in REAL.glob("llamacpp_init*"):
        assert llamacpp.detect_llamacpp(path.read_text()), path.name


def test_build_zero_is_unknown() -> None:
    facts = llamacpp.parse_llamacpp("build: 0 (unknown) with MSVC 19.44 for x64\n")
    assert facts.llamacpp == []
    (build,) = llamacpp.parse_llamacpp("build: 0 (unknown)\nggml_cuda_init: found 0\n").llamacpp
    assert (build.version, build.commit, build.cuda) == (None, None, True)


def test_probe_finds_a_build_dir(tmp_path: Path) -> None:
    build = tmp_path / "llama.cpp" / "build"
    (build / "bin").mkdir(parents=True)
    server = build / "bin" / "llama-server"
    server.write_text("#!/bin/sh\necho 'version: 9535 (da87e9b61)' >&2\n")
    server.chmod(0o755)
    (build / "CMakeCache.txt").write_text(
        "CMAKE_CUDA_ARCHITECTURES:STRING=86;89\nGGML_CUDA:BOOL=ON\nOTHER:BOOL=OFF\n"
    )
    compiler = build / "CMakeFiles" / "3.28.3"
    compiler.mkdir(parents=True)
    (compiler / "CMakeCUDACompiler.cmake").write_text(
        'set(CMAKE_CUDA_COMPILER_VERSION "12.8.93")\n'
    )
    env = {**os.environ, "HOME": str(tmp_path)}
    (probe,) = llamacpp.PROBES
    builds = {b.path: b for b in probe.parse(sh(probe.command, env=env)).llamacpp}
    found = builds[str(server.resolve())]
    assert (found.version, found.commit, found.cuda) == ("9535", "da87e9b61", True)
    assert found.cmake_cuda_architectures == "86;89"
    assert found.cuda_compiler_version == "12.8.93"
