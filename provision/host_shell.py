"""Commands gpuprov runs on a host outside operations and facts, as the host's own user would.

Operations and facts take the host's connection and privilege settings (`_sudo`, `_sudo_user`,
`_sudo_password`, `_su_user`, `_doas`, ... in host data, deploy arguments or the config) from
pyinfra itself. A bare `host.run_shell_command` does not: a deploy user with `_sudo: True` would
run the command unprivileged. Every such command goes through `run`, which passes them the same
way pyinfra's facts do (tests/test_host_shell.py keeps other code from calling the connector).
"""

from __future__ import annotations

import sys
from typing import Any

from pyinfra.api.arguments import CONNECTOR_ARGUMENT_KEYS, pop_global_arguments
from pyinfra.api.command import QuoteString, StringCommand
from pyinfra.api.host import Host
from pyinfra.connectors.util import CommandOutput


def connector_arguments(host: Host) -> dict[str, Any]:
    """The host's connector arguments (privilege, shell, environment), as its facts get them."""
    arguments, _ = pop_global_arguments(host.state, host, {})
    return {k: v for k, v in arguments.items() if k in CONNECTOR_ARGUMENT_KEYS}


def run(host: Host, command: StringCommand) -> tuple[bool, CommandOutput]:
    """Run `command` on `host` with the host's privilege and connection settings."""
    return host.run_shell_command(command, **connector_arguments(host))


ELEVATED = ("_sudo", "_su_user", "_doas", "_dzdo")
SUDO_OK = "gpuprov: sudo works"


def privilege_problem(host: Host, interactive: bool | None = None) -> str:
    """Why the host's privilege settings do not work, e.g. no passwordless sudo ("" if they do).

    Checked once before anything runs on the host, so a deploy user who cannot sudo gets one
    message instead of a failure in every probe. Where sudo wants a password and none is set,
    pyinfra asks for it on a terminal; without one (`interactive` False) the host is refused.
    """
    arguments = connector_arguments(host)
    how = next((key for key in ELEVATED if arguments.get(key)), "")
    user = host.data.get("ssh_user") or "the SSH user"
    if not how:
        ok, output = host.run_shell_command(StringCommand("id", "-u"), **arguments)
        if not ok or output.stdout_lines[-1:] == ["0"]:
            return ""  # a failing `id` is left to the probes to report
        return f"{user} is not root: set `_sudo: True` in the host's data to deploy through sudo"
    if interactive is None:
        interactive = sys.stdin.isatty()
    if how == "_sudo" and not arguments.get("_sudo_password") and not interactive:
        plain = {k: v for k, v in arguments.items() if k not in ("_sudo", "_sudo_user")}
        _, output = host.run_shell_command(sudo_probe(arguments.get("_sudo_user")), **plain)
        if SUDO_OK in output.stdout_lines:
            return ""
        said = next((line.strip() for line in reversed(output.stdout_lines) if line.strip()), "")
        return f"{user} cannot run commands through sudo: {said or 'sudo -n failed'}"
    ok, output = host.run_shell_command(StringCommand("true"), **arguments)
    if ok:
        return ""
    said = next((ln.strip() for ln in reversed(output.stderr_lines) if ln.strip()), "it failed")
    return f"{user} cannot run commands through {how.strip('_').replace('_', ' ')}: {said}"


def sudo_probe(user: str | None) -> StringCommand:
    """`sudo -n true`, exiting 0 either way: pyinfra answers a failing command's password prompt
    by asking for a password, which must not happen without a terminal."""
    as_user = ["-u", QuoteString(user)] if user else []
    return StringCommand(
        "sudo", "-n", *as_user, "true", "2>&1", "&&", "echo", QuoteString(SUDO_OK), ";", "exit 0"
    )
