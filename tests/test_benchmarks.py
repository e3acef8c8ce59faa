"""The benchmark scripts run and print their ratio line (a smoke test: no timing is asserted),
and the CUDA architecture benchmark reads CMake's default list and writes nvcc flags as CMake does.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).parent.parent / "benchmarks"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


archs = _load("cuda_archs_vs_default")

# The non-native default of llama.cpp's ggml/src/ggml-cuda/CMakeLists.txt as vendored in
# llama-cpp-python 0.3.36, with comments shortened and one line wrapped.
GGML_CUDA_CMAKE = """
if (CUDAToolkit_FOUND)
    if (NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
        # 86     == RTX 3000, needs CUDA v11.1
        if (GGML_NATIVE AND CUDAToolkit_VERSION VERSION_GREATER_EQUAL "11.6"
            AND CMAKE_VERSION VERSION_GREATER_EQUAL "3.24")
            set(CMAKE_CUDA_ARCHITECTURES "native")
        else()
            if (CUDAToolkit_VERSION VERSION_LESS "13")
                list(APPEND CMAKE_CUDA_ARCHITECTURES 50-virtual 61-virtual 70-virtual)
            endif ()

            list(APPEND CMAKE_CUDA_ARCHITECTURES 75-virtual 80-virtual 86-real)

            if (CUDAToolkit_VERSION VERSION_GREATER_EQUAL "11.8")
                list(APPEND CMAKE_CUDA_ARCHITECTURES 89-real 90-virtual)
            endif()

            if (CUDAToolkit_VERSION VERSION_GREATER_EQUAL "12.8")
                # The CUDA architecture 120f-virtual would in principle work (see CMake's regex)
                list(APPEND CMAKE_CUDA_ARCHITECTURES 120a-real)
            endif()
            if (CUDAToolkit_VERSION VERSION_GREATER_EQUAL "12.9")
                list(APPEND CMAKE_CUDA_ARCHITECTURES 121a-real)
            endif()
        endif()
    endif()
    enable_language(CUDA)
    foreach(ARCH IN LISTS ${ARCHS})
        if (ARCH MATCHES "^12[0-9](-real|-virtual)?$")
            string(REGEX REPLACE "^(12[0-9])((-real|-virtual)?)$" "\\1a\\2" FIXED_ARCH ${ARCH})
        endif()
    endforeach()
endif()
"""
OLDER = ["50-virtual", "61-virtual", "70-virtual"]
BASE = ["75-virtual", "80-virtual", "86-real"]


def _run(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, check=True, timeout=300
    )
    return done.stdout


def test_explain_benchmark_prints_a_ratio() -> None:
    out = _run(str(BENCHMARKS / "explain_vs_grep.py"), "--mb", "1", "--runs", "1")
    assert "gpuprov explain" in out and "grep -E -f" in out
    assert "ratio gpuprov/grep = " in out


def test_check_benchmark_prints_a_ratio() -> None:
    out = _run(str(BENCHMARKS / "check_vs_ansible_setup.py"), "--runs", "1")
    assert "ratio gpuprov/ansible = " in out


@pytest.mark.parametrize(
    ("cuda", "expected"),
    [
        ("11.7.64", [*OLDER, *BASE]),
        ("12.4.131", [*OLDER, *BASE, "89-real", "90-virtual"]),
        ("12.8", [*OLDER, *BASE, "89-real", "90-virtual", "120a-real"]),
        ("12.9.86", [*OLDER, *BASE, "89-real", "90-virtual", "120a-real", "121a-real"]),
        ("13", [*BASE, "89-real", "90-virtual", "120a-real", "121a-real"]),
        ("13.0.88", [*BASE, "89-real", "90-virtual", "120a-real", "121a-real"]),
    ],
)
def test_default_architectures_follow_the_cuda_version(cuda: str, expected: list[str]) -> None:
    assert archs.default_architectures(GGML_CUDA_CMAKE, cuda) == expected


BRANCHES = """
if (GGML_NATIVE)
    set(CMAKE_CUDA_ARCHITECTURES "native")
else()
    if (CUDAToolkit_VERSION VERSION_LESS "12")
        set(CMAKE_CUDA_ARCHITECTURES "52;61;70;75")
    elseif (CUDAToolkit_VERSION VERSION_LESS "13")
        set(CMAKE_CUDA_ARCHITECTURES "61;70;75;80")
    else()
        set(CMAKE_CUDA_ARCHITECTURES "75-virtual;80")
    endif()
    list(APPEND CMAKE_CUDA_ARCHITECTURES 86-real)  # added for every version
endif()
"""


@pytest.mark.parametrize(
    ("cuda", "expected"),
    [
        ("11.8", ["52", "61", "70", "75", "86-real"]),
        ("12.4", ["61", "70", "75", "80", "86-real"]),
        ("13.0", ["75-virtual", "80", "86-real"]),
    ],
)
def test_default_architectures_take_the_branch_cmake_takes(cuda: str, expected: list[str]) -> None:
    assert archs.default_architectures(BRANCHES, cuda) == expected


@pytest.mark.parametrize(
    ("text", "cuda"),
    [
        ("", "13.0"),
        (GGML_CUDA_CMAKE, "13.x"),
        (GGML_CUDA_CMAKE.replace("GGML_NATIVE AND", "GGML_SOMETHING AND"), "13.0"),
        (GGML_CUDA_CMAKE.replace('CUDAToolkit_VERSION VERSION_LESS "13"', "GGML_CUDA_F16"), "13.0"),
        (
            GGML_CUDA_CMAKE.replace(
                "APPEND CMAKE_CUDA_ARCHITECTURES 75", "REMOVE_ITEM CMAKE_CUDA_ARCHITECTURES 75"
            ),
            "13.0",
        ),
        (GGML_CUDA_CMAKE.replace("90-virtual", "native"), "13.0"),
        (GGML_CUDA_CMAKE.split("endif ()")[0], "13.0"),
        (GGML_CUDA_CMAKE.replace("endif ()", "", 1), "13.0"),
    ],
    ids=[
        "empty",
        "bad-version",
        "no-native-if",
        "other-condition",
        "other-list-op",
        "keyword",
        "truncated",
        "unbalanced",
    ],
)
def test_default_architectures_not_followed_are_unknown(text: str, cuda: str) -> None:
    assert archs.default_architectures(text, cuda) is None


def test_gencode_is_what_cmake_writes() -> None:
    # as CMake 3.25 writes them into compile_commands.json (seen for each of these four)
    assert archs.gencode(["86", "120a", "75-virtual", "89-real"]) == [
        "--generate-code=arch=compute_86,code=[compute_86,sm_86]",
        "--generate-code=arch=compute_120a,code=[compute_120a,sm_120a]",
        "--generate-code=arch=compute_75,code=[compute_75]",
        "--generate-code=arch=compute_89,code=[sm_89]",
    ]
    with pytest.raises(ValueError, match="native"):
        archs.gencode(["native"])


def test_derived_architectures_are_the_roles() -> None:
    assert archs.derived_architectures("8.6") == ["86"]
    assert archs.derived_architectures("12.0") == ["120a"]
    assert archs.derived_architectures("unknown") is None


def test_cuda_archs_benchmark_says_how_to_get_what_is_missing(tmp_path: Path) -> None:
    assert archs.tools(None, tmp_path, None) == "no nvcc found: pass --nvcc"
    assert "no nvcc at" in archs.tools(str(tmp_path / "nvcc"), tmp_path, None)
    nvcc = archs.find_nvcc()
    if nvcc is None:
        pytest.skip("no nvcc here")
    missing = archs.tools(nvcc, tmp_path / "none.tar.gz", None)
    assert isinstance(missing, str) and "pip download" in missing
    assert "llama-cpp-python==" in missing


def test_cuda_archs_benchmark_prints_a_ratio() -> None:
    found = archs.tools(archs.find_nvcc(), archs.default_sdist(), None)
    if isinstance(found, str):
        pytest.skip(found)
    out = _run(str(BENCHMARKS / "cuda_archs_vs_default.py"), "--quick")
    assert re.search(r"^default architectures: \S*86", out, re.MULTILINE)
    assert re.search(r"^derived 86 +median .*\n^default \(\d+ archs\) +median", out, re.MULTILINE)
    assert "ratio default/derived = " in out
