"""pyinfra tasks of the llama_server role (Ansible: tasks/main.yml).

One unit per profile. A server restarts only when its unit, its EnvironmentFile or the binary
changed; units of profiles no longer in the inventory are stopped and removed.
"""

from __future__ import annotations

import dataclasses
import re
from io import StringIO

from pyinfra.api.deploy import deploy
from pyinfra.api.operation import OperationMeta
from pyinfra.context import host
from pyinfra.facts.files import File, FindFiles
from pyinfra.facts.server import Command
from pyinfra.operations import files, server, systemd

from provision import templates
from provision.hostplan import HostPlan

UNITS = "/etc/systemd/system"


def systemd_version() -> int:
    """systemd's version on the host (0 if unknown)."""
    m = re.match(r"systemd (\d+)", host.get_fact(Command, command="systemctl --version") or "")
    return int(m.group(1)) if m else 0


def has_persistenced() -> bool:
    return any(
        host.get_fact(File, path=f"{d}/nvidia-persistenced.service")
        for d in ("/lib/systemd/system", "/usr/lib/systemd/system", UNITS)
    )


@deploy("llama.cpp servers")
def llama_server(plan: HostPlan, binary: OperationMeta | None) -> None:
    v = plan.variables
    server.user(
        name="Add the servers' system user",
        user=plan.stack.server_user,
        system=True,
        shell="/usr/sbin/nologin",
        home="/nonexistent",
        create_home=False,
    )
    config_dir = v["llama_server_config_dir"]
    files.directory(name="Server config folder", path=config_dir, mode="755")
    facts = {"systemd_version": systemd_version(), "nvidia_persistenced": has_persistenced()}
    changed: dict[str, bool] = {}
    for p in plan.stack.profiles:
        profile = dataclasses.asdict(p)
        env = templates.render(
            "llama_server",
            "llama-server.env.j2",
            profile=profile,
            api_key=plan.secrets.get(p.name, ""),
        )
        state = host.state
        diff, state.config.DIFF = state.config.DIFF, False  # the file may hold a key: no diff
        try:
            env_op = files.put(
                name=f"EnvironmentFile of {p.name} (0600)",
                src=StringIO(env),
                dest=f"{config_dir}/{p.name}.env",
                mode="600",
                user="root",
                group="root",
            )
        finally:
            state.config.DIFF = diff
        unit = templates.render(
            "llama_server", "llama-server.service.j2", profile=profile, **v, **facts
        )
        unit_op = files.put(
            name=f"Unit {p.unit}", src=StringIO(unit), dest=f"{UNITS}/{p.unit}", mode="644"
        )
        changed[p.unit] = bool(env_op.changed or unit_op.changed)
    stale = [
        name
        for path in host.get_fact(FindFiles, path=UNITS, fname="gpuprov-llama-*.service") or []
        if (name := path.rsplit("/", 1)[-1]) not in changed
    ]
    for unit in stale:
        systemd.service(
            name=f"Stop removed profile {unit}", service=unit, running=False, enabled=False
        )
        files.file(name=f"Remove {unit}", path=f"{UNITS}/{unit}", present=False)
    if stale or any(changed.values()):
        systemd.daemon_reload(name="Reload systemd units")
    for unit, unit_changed in changed.items():
        systemd.service(
            name=f"{'Restart' if unit_changed or binary else 'Run'} {unit}",
            service=unit,
            running=True,
            enabled=True,
            restarted=unit_changed or binary is not None,
        )
