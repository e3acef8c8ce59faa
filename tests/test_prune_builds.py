"""Which llama.cpp builds `--prune-builds N` removes (provision.build.prunable): the newest N stay,
the planned build counts as the newest, and the one `current` points at always stays. The
operations on a real host are tested in tests/e2e/test_apply_llama.py."""

from __future__ import annotations

import pytest

from provision import build

# list_builds_command's output: `ls -1t` (newest first), then current's target.
LISTED = ["b7900-aaa", "b7895-bbb", "b7800-ccc", "b7700-ddd", "current=builds/b7800-ccc"]


@pytest.mark.parametrize(
    ("planned", "keep", "removed"),
    [
        # Nothing new: the newest 2 stay, and current (the third) is never removed.
        ("b7900-aaa", 2, ["b7700-ddd"]),
        ("b7900-aaa", 1, ["b7895-bbb", "b7700-ddd"]),
        ("b7900-aaa", 4, []),
        # A new build comes first: it and current stay with keep=1.
        ("b8000-new", 1, ["b7900-aaa", "b7895-bbb", "b7700-ddd"]),
        ("b8000-new", 3, ["b7700-ddd"]),
    ],
)
def test_the_newest_n_and_current_stay(planned: str, keep: int, removed: list[str]) -> None:
    assert build.prunable(LISTED, planned, keep) == removed


def test_what_is_not_a_build_name_is_never_removed() -> None:
    listed = [".b1.partial", "..", "b1", "bad name", "/etc", "b2", "current=builds/b2"]
    assert build.prunable(listed, "b2", 1) == ["b1"]


def test_an_empty_prefix_removes_nothing() -> None:
    assert build.prunable(["current="], "b1", 1) == []
    assert build.prunable([], "b1", 1) == []


def test_the_listing_command_quotes_the_prefix() -> None:
    command = build.list_builds_command("/opt/my builds")
    assert "ls -1t '/opt/my builds/builds'" in command
    assert "readlink '/opt/my builds/current'" in command
