"""units.put_secret: an EnvironmentFile that may hold a key is never readable by others, not even
while it is uploaded, and a rerun changes nothing.

The operations run on this machine (@local), the file under tmp_path; the commands they generate
are read before they run. The real upload, over SSH with and without sudo, is exercised by the
e2e tests (tests/e2e/test_apply_llama.py, test_apply_sudo.py, test_apply_vllm.py).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyinfra.api.command import FileUploadCommand
from pyinfra.api.config import Config
from pyinfra.api.connect import connect_all, disconnect_all
from pyinfra.api.deploy import add_deploy, deploy
from pyinfra.api.inventory import Inventory
from pyinfra.api.operations import run_ops
from pyinfra.api.state import State
from pyinfra.context import ctx_host, ctx_state

from provision import units

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the file is made root's")

CONTENT = 'LLAMA_API_KEY="sk-0123456789"\n'


@pytest.fixture
def local() -> Iterator[State]:
    state = State(Inventory((["@local"], {})), Config(DIFF=True))  # type: ignore[no-untyped-call]
    connect_all(state)
    yield state
    disconnect_all(state)


def put(state: State, content: str, dest: Path) -> list[list[str]]:
    """Run put_secret; the commands of each of its operations, as they were generated."""

    @deploy("secret")
    def run() -> None:
        units.put_secret("EnvironmentFile of main (0600)", content, str(dest))

    add_deploy(state, run)
    host = next(iter(state.inventory))
    commands = []
    with ctx_host.use(host), ctx_state.use(state):
        for op in state.get_op_order():
            generated = state.get_op_data_for_host(host, op).command_generator()
            commands.append(
                [
                    f"upload {c.dest}" if isinstance(c, FileUploadCommand) else str(c)
                    for c in generated
                ]
            )
    run_ops(state)
    assert not state.failed_hosts
    return commands


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_secret_is_uploaded_where_only_root_reads_it_then_moved(
    local: State, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dest, folder = tmp_path / "main.env", tmp_path / ".upload"
    staged = folder / "main.env"
    assert put(local, CONTENT, dest) == [
        [f"mkdir -p {folder}", f"chmod 700 {folder}", f"chown root {folder}"],
        [
            f"upload {staged}",
            f"chown root:root {staged}",
            f"chmod 600 {staged}",
            f"mv -f {staged} {dest}",
        ],
    ]
    assert dest.read_text() == CONTENT
    assert (mode(dest), dest.stat().st_uid, mode(folder)) == (0o600, 0, 0o700)
    assert list(folder.iterdir()) == []
    assert "sk-0123456789" not in "".join(capsys.readouterr())  # no diff shown, DIFF on or not


def test_a_rerun_changes_nothing(local: State, tmp_path: Path) -> None:
    dest = tmp_path / "main.env"
    dest.write_text(CONTENT)
    dest.chmod(0o600)
    (tmp_path / ".upload").mkdir(mode=0o700)
    assert put(local, CONTENT, dest) == [[], []]


@pytest.mark.parametrize(("content", "file_mode"), [(CONTENT, 0o644), ("OTHER=1\n", 0o600)])
def test_a_changed_file_or_mode_is_put_again(
    local: State, tmp_path: Path, content: str, file_mode: int
) -> None:
    dest = tmp_path / "main.env"
    dest.write_text(content)
    dest.chmod(file_mode)
    commands = put(local, CONTENT, dest)
    assert commands[1][-1] == f"mv -f {tmp_path}/.upload/main.env {dest}"
    assert (dest.read_text(), mode(dest)) == (CONTENT, 0o600)
