"""The apply lock's shell snippets, run here with sh exactly as pyinfra runs them on a host.

Real: lock.TRY and lock.RELEASE under /bin/sh, with `gpuprov-lock` as $0, the lock path as $1
and the owner token as $2; a tmp folder stands in for /run/gpuprov.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from provision import lock

FIRST = lock.token()
SECOND = "other@elsewhere pid 42 since 2026-01-01T00:00:00 deadbeef"


def run(script: str, path: Path, owner: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sh", "-c", script, "gpuprov-lock", str(path), owner],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


@pytest.fixture
def path(tmp_path: Path) -> Path:
    """Two folders deep, not there yet: TRY makes the parent."""
    return tmp_path / "run" / "gpuprov" / "apply.lock"


def test_token_names_who_holds_it() -> None:
    assert "@" in FIRST
    assert " pid " in FIRST
    assert lock.token() != FIRST


def test_first_acquire_succeeds(path: Path) -> None:
    done = run(lock.TRY, path, FIRST)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert (path / "owner").read_text() == FIRST + "\n"


def test_second_acquire_fails_naming_the_owner(path: Path) -> None:
    run(lock.TRY, path, FIRST)
    for owner in (SECOND, FIRST):  # not re-entrant: the holder waits like anyone else
        done = run(lock.TRY, path, owner)
        assert done.returncode == 1
        assert done.stdout.strip() == FIRST
    assert (path / "owner").read_text() == FIRST + "\n"


def test_release_by_another_owner_does_nothing(path: Path) -> None:
    run(lock.TRY, path, FIRST)
    assert run(lock.RELEASE, path, SECOND).returncode != 0
    assert run(lock.RELEASE, path, FIRST[:-1]).returncode != 0
    assert (path / "owner").read_text() == FIRST + "\n"
    assert run(lock.TRY, path, SECOND).stdout.strip() == FIRST


def test_release_by_the_owner_frees_it(path: Path) -> None:
    run(lock.TRY, path, FIRST)
    assert run(lock.RELEASE, path, FIRST).returncode == 0
    assert not path.exists()
    assert path.parent.is_dir()
    assert run(lock.TRY, path, SECOND).returncode == 0
    assert (path / "owner").read_text() == SECOND + "\n"


def test_release_of_a_free_lock_is_harmless(path: Path) -> None:
    assert run(lock.RELEASE, path, FIRST).returncode != 0
    assert not path.exists()


def test_owner_with_shell_characters(path: Path, tmp_path: Path) -> None:
    owner = f"me@box pid 1 $(touch {tmp_path}/pwned) `id` \"q\" 'q' * ;"
    assert run(lock.TRY, path, owner).returncode == 0
    assert run(lock.TRY, path, SECOND).stdout == owner + "\n"
    assert run(lock.RELEASE, path, owner).returncode == 0
    assert not path.exists()
    assert not (tmp_path / "pwned").exists()


def test_lock_without_owner_file_reports_no_owner(path: Path) -> None:
    """A lock left half-made (folder, no owner): held, with an empty owner (shown as unknown)."""
    path.mkdir(parents=True)
    done = run(lock.TRY, path, FIRST)
    assert (done.returncode, done.stdout) == (1, "")
    assert run(lock.RELEASE, path, FIRST).returncode != 0
    assert path.is_dir()
