"""The version normalisers: driver versions, CUDA versions, kernel releases."""

from __future__ import annotations

import copy
import pickle

import pytest
from packaging.version import Version

from checks import versions


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("580.65.06", Version("580.65.6")),
        ("570.26", Version("570.26")),
        ("Driver Version: 535.171.04", Version("535.171.4")),
        (
            "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06  Release",
            Version("580.65.6"),
        ),
        ("550.54.14-0ubuntu1", Version("550.54.14")),
        ("", None),
        (None, None),
        ("N/A", None),
        ("unknown", None),
    ],
)
def test_driver(text: str | None, expected: Version | None) -> None:
    assert versions.driver(text) == expected


def test_driver_ordering_ignores_leading_zeros() -> None:
    assert versions.driver("580.65.06") == versions.driver("580.65.6")
    assert versions.driver("580.65.06") < versions.driver("580.82.07")  # type: ignore[operator]
    assert versions.driver("570.124.04") < versions.driver("570.124.06")  # type: ignore[operator]
    assert versions.driver("570.26") < versions.driver("570.124.06")  # type: ignore[operator]
    assert versions.branch("610.43.02") == 610


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("580.65.06", "580.65.06"),
        ("Driver Version: 535.171.04", "535.171.04"),
        ("570.26", "570.26"),
        ("550.54.14-0ubuntu1", "550.54.14"),
    ],
)
def test_driver_prints_as_nvidia_writes_it(text: str, shown: str) -> None:
    """Compared as a Version, printed from its own text: 580.65.06, never 580.65.6."""
    version = versions.driver(text)
    assert version is not None
    assert str(version) == f"{version}" == shown
    assert str(copy.deepcopy(version)) == str(pickle.loads(pickle.dumps(version))) == shown


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("12.8", Version("12.8")),
        ("12.8.1", Version("12.8.1")),
        ("V12.6.20", Version("12.6.20")),
        ("cuda>=12.4", Version("12.4")),
        ("12080", Version("12.8")),
        ("11040", Version("11.4")),
        ("13000", Version("13.0")),
        ("release 13.0, V13.0.88", Version("13.0")),
        ("N/A", None),
        (None, None),
    ],
)
def test_cuda(text: str | None, expected: Version | None) -> None:
    assert versions.cuda(text) == expected


def test_release_drops_the_patch() -> None:
    assert versions.release("12.8.93") == Version("12.8")
    assert versions.release("garbage") is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2.6.0+cu126", Version("12.6")),
        ("2.7.1+cu128", Version("12.8")),
        ("2.9.0+cu130", Version("13.0")),
        ("2.1.2+cu118", Version("11.8")),
        ("2.6.0", None),
        ("2.6.0+cpu", None),
        (None, None),
    ],
)
def test_torch_cuda(text: str | None, expected: Version | None) -> None:
    assert versions.torch_cuda(text) == expected


@pytest.mark.parametrize(
    ("text", "version", "abi", "flavour"),
    [
        ("6.8.0-45-generic", "6.8.0", 45, "generic"),
        ("6.14.6-200.fc41.x86_64", "6.14.6", 200, "fc41.x86_64"),
        ("6.1.0-27-amd64", "6.1.0", 27, "amd64"),
        ("5.15.167.4-microsoft-standard-WSL2", "5.15.167", 4, "microsoft-standard-WSL2"),
        ("6.18.44-fc-v769", "6.18.44", None, "fc-v769"),
        ("6.11.0", "6.11.0", None, None),
        ("5.4", "5.4.0", None, None),
    ],
)
def test_kernel(text: str, version: str, abi: int | None, flavour: str | None) -> None:
    release = versions.kernel(text)
    assert release is not None
    assert release.version == Version(version)
    assert release.abi == abi
    assert release.flavour == flavour


def test_kernel_ordering_uses_the_abi() -> None:
    older, newer = versions.kernel("6.8.0-45-generic"), versions.kernel("6.8.0-101-generic")
    assert older is not None and newer is not None
    assert older.comparable < newer.comparable
    assert versions.kernel("not a kernel") is None
    assert versions.kernel("") is None
