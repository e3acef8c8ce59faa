"""Every command gpuprov runs on a host honours the host's privilege settings.

Operations and facts get `_sudo` and friends from pyinfra; the few commands run outside them go
through provision.host_shell. The spy below is the real pyinfra host and connector up to the
point where the command would start: it records the command line the connector would run.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyinfra.api import Config, Inventory, State
from pyinfra.api.command import StringCommand
from pyinfra.api.host import Host
from pyinfra.connectors.util import (
    CommandOutput,
    OutputLine,
    extract_control_arguments,
    make_unix_command_for_host,
)

from provision import host_shell, lock

ROOT = Path(__file__).resolve().parent.parent


def test_no_other_code_calls_the_connector_directly() -> None:
    """`host.run_shell_command` skips the host's _sudo; only host_shell may call it."""
    callers = []
    for folder in ("checks", "provision", "roles"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path == ROOT / "provision" / "host_shell.py":
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Attribute) and node.attr == "run_shell_command":
                    callers.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert callers == []


def _host(data: dict[str, Any]) -> tuple[State, Host]:
    inventory = Inventory(([("@local", data)], {}))
    state = State(inventory, Config())
    host = inventory.get_host("@local")
    return state, host


@pytest.fixture
def spied() -> Iterator[tuple[Host, list[str]]]:
    state, host = _host({"_sudo": True, "_sudo_user": "gpuprov-ops", "_env": {"LC_ALL": "C"}})
    ran: list[str] = []

    def run_shell_command(command: StringCommand, **arguments: Any) -> tuple[bool, CommandOutput]:
        extract_control_arguments(arguments)  # as the connectors do before building the line
        line = make_unix_command_for_host(state, host, command, **arguments)
        ran.append(line.get_raw_value())
        return True, CommandOutput([])

    host.connector.run_shell_command = run_shell_command  # type: ignore[method-assign]
    yield host, ran


def test_run_uses_the_hosts_sudo_settings(spied: tuple[Host, list[str]]) -> None:
    host, ran = spied
    ok, _ = host_shell.run(host, StringCommand("id", "-u"))
    assert ok
    assert len(ran) == 1
    assert ran[0].startswith("sudo -H -n -u gpuprov-ops ")
    assert "LC_ALL=C" in ran[0]
    assert ran[0].endswith("id -u'")


def test_the_apply_lock_runs_under_sudo(spied: tuple[Host, list[str]]) -> None:
    host, ran = spied
    assert lock.acquire(host, "me@here", 1, print) == (True, "")
    lock.release(host, "me@here")
    assert len(ran) == 2
    assert all(line.startswith("sudo -H -n -u gpuprov-ops ") for line in ran)
    assert lock.PATH in ran[0]


def test_without_privilege_settings_nothing_is_added() -> None:
    _, host = _host({})
    assert not host_shell.connector_arguments(host).get("_sudo")


def test_the_lock_holder_is_read_from_stdout_only() -> None:
    """sudo warns on stderr (e.g. "unable to resolve host"); the holder is what the lock says."""
    _, host = _host({"_sudo": True})
    lines = [
        OutputLine("stderr", "sudo: unable to resolve host box: Name or service not known"),
        OutputLine("stdout", "other@elsewhere pid 7"),
    ]

    def run_shell_command(command: StringCommand, **arguments: Any) -> tuple[bool, CommandOutput]:
        return False, CommandOutput(lines)

    host.connector.run_shell_command = run_shell_command  # type: ignore[method-assign]
    ok, why = lock.acquire(host, "me@here", 0, print)
    assert not ok
    assert "(other@elsewhere pid 7)" in why
    assert "sudo:" not in why


def _answering(host: Host, ran: list[tuple[str, dict[str, Any]]], *lines: OutputLine) -> None:
    def run_shell_command(command: StringCommand, **arguments: Any) -> tuple[bool, CommandOutput]:
        ran.append((command.get_raw_value(), arguments))
        return True, CommandOutput(list(lines))

    host.connector.run_shell_command = run_shell_command  # type: ignore[method-assign]


def test_root_needs_no_privilege_settings() -> None:
    _, host = _host({})
    ran: list[tuple[str, dict[str, Any]]] = []
    _answering(host, ran, OutputLine("stdout", "0"))
    assert host_shell.privilege_problem(host, interactive=False) == ""
    assert [command for command, _ in ran] == ["id -u"]


def test_another_user_without_privilege_settings_is_refused() -> None:
    """Without _sudo every install would fail; say so once instead."""
    _, host = _host({"ssh_user": "ubuntu"})
    _answering(host, [], OutputLine("stdout", "1000"))
    problem = host_shell.privilege_problem(host, interactive=False)
    assert problem == (
        "ubuntu is not root: set `_sudo: True` in the host's data to deploy through sudo"
    )


def test_sudo_that_wants_a_password_without_a_terminal_is_refused() -> None:
    _, host = _host({"_sudo": True, "ssh_user": "ubuntu"})
    ran: list[tuple[str, dict[str, Any]]] = []
    _answering(host, ran, OutputLine("stdout", "sudo: a password is required"))
    problem = host_shell.privilege_problem(host, interactive=False)
    assert problem == "ubuntu cannot run commands through sudo: sudo: a password is required"
    ((command, arguments),) = ran
    assert command.startswith("sudo -n true")
    assert not arguments.get("_sudo")  # probed plainly, so pyinfra never prompts


def test_passwordless_sudo_passes() -> None:
    _, host = _host({"_sudo": True, "_sudo_user": "svc"})
    ran: list[tuple[str, dict[str, Any]]] = []
    _answering(host, ran, OutputLine("stdout", host_shell.SUDO_OK))
    assert host_shell.privilege_problem(host, interactive=False) == ""
    assert ran[0][0].startswith("sudo -n -u svc true")


def test_on_a_terminal_pyinfra_may_ask_for_the_password() -> None:
    """Interactive: the command runs with _sudo, so pyinfra's own prompt answers sudo."""
    _, host = _host({"_sudo": True})
    ran: list[tuple[str, dict[str, Any]]] = []
    _answering(host, ran)
    assert host_shell.privilege_problem(host, interactive=True) == ""
    assert ran[0][1].get("_sudo") is True
