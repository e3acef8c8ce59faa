"""Which compiled targets run on which compute capability."""

from __future__ import annotations

import pytest

from checks import coverage


@pytest.mark.parametrize(
    ("cmake", "cc", "runs"),
    [
        ("86;89", (8, 6), True),
        ("86;89", (8, 9), True),
        ("86", (8, 9), True),  # sm_86 SASS runs on later minors of major 8
        ("89", (8, 6), False),
        ("86;89", (12, 0), True),  # compute_89 PTX JITs on newer GPUs
        ("86-real;89-real", (12, 0), False),
        ("120a", (12, 0), True),
        ("120a", (12, 1), False),  # arch-specific: exactly 12.0
        ("120a-real;121a-real", (12, 1), True),
        ("120f", (12, 1), True),  # family: same major
        ("90a", (9, 0), True),
        ("90-virtual", (10, 0), True),
    ],
)
def test_cmake_targets(cmake: str, cc: tuple[int, int], runs: bool) -> None:
    targets = coverage.from_cmake(cmake)
    assert targets is not None
    assert coverage.covers(targets, cc) is runs


@pytest.mark.parametrize("value", ["native", "all", "all-major", "", None, "86;native"])
def test_cmake_values_that_say_nothing(value: str | None) -> None:
    assert coverage.from_cmake(value) is None


def test_system_info_archs_are_sass() -> None:
    targets = coverage.from_system_info(["890"])
    assert targets is not None
    assert coverage.covers(targets, (8, 9))
    assert not coverage.covers(targets, (12, 0))
    assert coverage.from_system_info(["1200"]) == [coverage.Target(12, 0, ptx=False)]
    assert coverage.from_system_info(["x"]) is None


def test_torch_arch_names() -> None:
    targets = coverage.from_names(["sm_70", "sm_120", "compute_120"])
    assert coverage.covers(targets, (12, 1))
    assert not coverage.covers(targets, (6, 1))
    assert coverage.describe(targets) == "sm_70, sm_120, compute_120"


@pytest.mark.parametrize(
    ("text", "expected"), [("8.6", (8, 6)), ("12.0", (12, 0)), ("N/A", None), (None, None)]
)
def test_cc_tuple(text: str | None, expected: tuple[int, int] | None) -> None:
    assert coverage.cc_tuple(text) == expected
