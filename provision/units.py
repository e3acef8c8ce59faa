"""pyinfra operations the service roles share: secret files, and one unit per service kept in step.

Units of services no longer planned are stopped and removed with their EnvironmentFiles; a unit
restarts only when it, its EnvironmentFile or what it runs changed.
"""

from __future__ import annotations

from io import StringIO
from typing import Any

from pyinfra.context import host
from pyinfra.facts.files import File, FindFiles
from pyinfra.operations import files, systemd

from provision.settings.read import NAME

UNITS = "/etc/systemd/system"


def has_persistenced() -> bool:
    """Whether the host has nvidia-persistenced's unit (units then start after it)."""
    return any(
        host.get_fact(File, path=f"{d}/nvidia-persistenced.service")
        for d in ("/lib/systemd/system", "/usr/lib/systemd/system", UNITS)
    )


def put_secret(name: str, content: str, dest: str) -> Any:
    """A root-owned 0600 file whose diff is never printed (it may hold a key or a token)."""
    state = host.state
    diff, state.config.DIFF = state.config.DIFF, False
    try:
        return files.put(
            name=name, src=StringIO(content), dest=dest, mode="600", user="root", group="root"
        )
    finally:
        state.config.DIFF = diff


def converge(
    changed: dict[str, bool], pattern: str, what: str, config_dir: str, restart_all: bool = False
) -> None:
    """Run every unit in `changed` (restarting the changed ones, or all with `restart_all`) and
    stop and remove the units matching `pattern` ("gpuprov-x-*.service") that are not in it,
    each with the EnvironmentFile put for it, `config_dir`/<name>.env (it may hold a key)."""
    stale = [
        name
        for path in host.get_fact(FindFiles, path=UNITS, fname=pattern) or []
        if (name := path.rsplit("/", 1)[-1]) not in changed
    ]
    prefix, suffix = pattern.split("*")
    for unit in stale:
        systemd.service(
            name=f"Stop removed {what} {unit}", service=unit, running=False, enabled=False
        )
        files.file(name=f"Remove {unit}", path=f"{UNITS}/{unit}", present=False)
        service = unit.removeprefix(prefix).removesuffix(suffix)
        if NAME.fullmatch(service):  # a name gpuprov gives a service, so a file it wrote
            env = f"{config_dir}/{service}.env"
            files.file(name=f"Remove {env}", path=env, present=False)
    if stale or any(changed.values()):
        systemd.daemon_reload(name="Reload systemd units")
    for unit, unit_changed in changed.items():
        restart = unit_changed or restart_all
        systemd.service(
            name=f"{'Restart' if restart else 'Run'} {unit}",
            service=unit,
            running=True,
            enabled=True,
            restarted=restart,
        )
