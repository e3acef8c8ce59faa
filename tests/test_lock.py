"""The apply lock: flock(1) held by a command that lives as long as the apply holds the lock.

Real: lock.HOLD and lock.RELEASE under /bin/sh with this machine's flock, as pyinfra runs them on
a host (`gpuprov-lock` as $0, the lock file as $1, the owner as $2, seconds to wait as $3), and
lock.acquire through pyinfra's local connector in a process of its own that is then killed.
A tmp folder stands in for /run/gpuprov.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyinfra.api import Config, Inventory, State
from pyinfra.api.host import Host

from provision import lock

FIRST = lock.token()
SECOND = "other@elsewhere pid 42 since 2026-01-01T00:00:00 deadbeef"


def run(script: str, path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sh", "-c", script, "gpuprov-lock", str(path), *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def hold(path: Path, owner: str) -> subprocess.Popen[str]:
    """HOLD in a session of its own, once it says it holds the lock."""
    proc = subprocess.Popen(
        ["sh", "-c", lock.HOLD, "gpuprov-lock", str(path), owner, "0"],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == "held\n"
    return proc


@pytest.fixture
def path(tmp_path: Path) -> Path:
    """Two folders deep, not there yet: HOLD makes the parent."""
    return tmp_path / "run" / "gpuprov" / "apply.lock"


@pytest.fixture
def held(path: Path) -> Iterator[subprocess.Popen[str]]:
    proc = hold(path, FIRST)
    yield proc
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


def test_token_names_who_holds_it() -> None:
    assert "@" in FIRST
    assert " pid " in FIRST
    assert lock.token() != FIRST


def test_the_holder_writes_who_holds_it(held: subprocess.Popen[str], path: Path) -> None:
    assert path.read_text() == FIRST + "\n"
    assert run(lock.HOLDER, path).stdout == FIRST + "\n"


def test_second_hold_fails_naming_the_owner(held: subprocess.Popen[str], path: Path) -> None:
    for owner in (SECOND, FIRST):  # not re-entrant: the holder waits like anyone else
        done = run(lock.HOLD, path, owner, "0")
        assert done.returncode == lock.BUSY
        assert done.stdout.strip() == FIRST
    assert path.read_text() == FIRST + "\n"
    assert held.poll() is None


def test_release_by_another_owner_does_nothing(held: subprocess.Popen[str], path: Path) -> None:
    assert run(lock.RELEASE, path, SECOND).returncode != 0
    assert run(lock.RELEASE, path, FIRST[:-1]).returncode != 0
    assert run(lock.HOLD, path, SECOND, "0").returncode == lock.BUSY
    assert held.poll() is None


def test_release_by_the_owner_ends_the_holder(held: subprocess.Popen[str], path: Path) -> None:
    assert run(lock.RELEASE, path, FIRST).returncode == 0
    assert held.wait(timeout=30) == 0
    second = hold(path, SECOND)
    assert path.read_text() == SECOND + "\n"
    os.killpg(second.pid, signal.SIGKILL)
    second.wait(timeout=30)


def test_the_kernel_releases_a_killed_holder(held: subprocess.Popen[str], path: Path) -> None:
    """SIGKILL leaves no release undone: the next HOLD, waiting 0 seconds, takes it."""
    os.killpg(held.pid, signal.SIGKILL)
    held.wait(timeout=30)
    second = hold(path, SECOND)
    os.killpg(second.pid, signal.SIGKILL)
    second.wait(timeout=30)


def test_a_holder_no_one_reads_ends(held: subprocess.Popen[str], path: Path) -> None:
    """The connection gone (here: the pipe the heartbeat goes to), the holder ends."""
    assert held.stdout is not None
    held.stdout.close()
    held.wait(timeout=30)
    second = hold(path, SECOND)
    os.killpg(second.pid, signal.SIGKILL)
    second.wait(timeout=30)


def test_release_of_a_free_lock_is_harmless(path: Path) -> None:
    assert run(lock.RELEASE, path, FIRST).returncode != 0
    assert not path.exists()


def test_owner_with_shell_characters(path: Path, tmp_path: Path) -> None:
    owner = f"me@box pid 1 $(touch {tmp_path}/pwned) `id` \"q\" 'q' * ;"
    proc = hold(path, owner)
    assert run(lock.HOLD, path, SECOND, "0").stdout == owner + "\n"
    assert run(lock.RELEASE, path, owner).returncode == 0
    assert proc.wait(timeout=30) == 0
    assert not (tmp_path / "pwned").exists()


# Through pyinfra's local connector, in this process and in a child that is killed.

CHILD = """
import signal, sys, time
# As in a terminal: a run started under nohup would hand SIGHUP's "ignore" down to this child.
signal.signal(signal.SIGHUP, signal.SIG_DFL)
from pyinfra.api import Config, Inventory, State
from provision import lock
inventory = Inventory(([("@local", {})], {}))
State(inventory, Config())
host = inventory.get_host("@local")
host.connect()
ok, why = lock.acquire(host, sys.argv[2], 0, print, path=sys.argv[1])
print("held" if ok else why, flush=True)
time.sleep(600)
"""


def local_host() -> Host:
    inventory = Inventory(([("@local", {})], {}))
    State(inventory, Config())
    host = inventory.get_host("@local")
    host.connect()
    return host


def child(path: Path, owner: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path), owner],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == "held\n"
    return proc


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM, signal.SIGHUP])
def test_an_apply_killed_while_holding_frees_the_lock(path: Path, signum: int) -> None:
    """The old lock stayed taken after a killed apply, and every later apply gave up."""
    proc = child(path, SECOND)
    host = local_host()
    said: list[str] = []
    ok, why = lock.acquire(host, FIRST, 0, said.append, path=str(path))
    assert not ok
    assert f"({SECOND})" in why
    proc.send_signal(signum)
    proc.wait(timeout=30)
    ok, why = lock.acquire(host, FIRST, 30, said.append, path=str(path))
    assert (ok, why) == (True, "")
    assert path.read_text() == FIRST + "\n"
    lock.release(host, FIRST, path=str(path))
    assert path.read_text() == ""
    assert lock.acquire(host, SECOND, 0, said.append, path=str(path)) == (True, "")
    lock.release(host, SECOND, path=str(path))


def test_a_waiting_apply_says_who_holds_the_lock(path: Path) -> None:
    proc = child(path, SECOND)
    try:
        said: list[str] = []
        ok, _ = lock.acquire(local_host(), FIRST, 2, said.append, path=str(path))
        assert not ok
        assert said == [f"@local: waiting for the apply lock held by {SECOND}"]
    finally:
        proc.kill()
        proc.wait(timeout=30)


def test_sigterm_and_sighup_end_an_apply_through_its_finally(path: Path) -> None:
    """`gpuprov apply` turns them into an exception, so the locks are released on the way out."""
    from provision import converge_cli

    host = local_host()
    for signum in converge_cli.STOP_SIGNALS:
        before = signal.getsignal(signum)
        with pytest.raises(converge_cli.Stopped), converge_cli.stopped_by_signals():
            assert lock.acquire(host, FIRST, 0, print, path=str(path)) == (True, "")
            try:
                os.kill(os.getpid(), signum)
                time.sleep(30)  # the handler raises as soon as the signal arrives
            finally:
                lock.release(host, FIRST, path=str(path))
        assert signal.getsignal(signum) == before
        assert lock.acquire(host, SECOND, 0, print, path=str(path)) == (True, "")
        lock.release(host, SECOND, path=str(path))


def test_a_folder_older_gpuprov_left_is_not_in_the_way(tmp_path: Path) -> None:
    """Older gpuprov locked with `mkdir /run/gpuprov/apply.lock`; a folder a crashed one left
    stays until a reboot, beside the lock file, not in its way."""
    assert Path(lock.PATH).parent == Path("/run/gpuprov")
    assert Path(lock.PATH).name != "apply.lock"
    old = tmp_path / "apply.lock"
    old.mkdir()
    (old / "owner").write_text(SECOND + "\n")
    proc = hold(tmp_path / Path(lock.PATH).name, FIRST)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
