"""pyinfra tasks of the llama_server role (Ansible: tasks/main.yml).

One unit per profile. A server restarts only when its unit, its EnvironmentFile or the binary
changed; units of profiles no longer in the inventory are stopped and removed, with their
EnvironmentFiles.
"""

from __future__ import annotations

import dataclasses
import re
from io import StringIO

from pyinfra.api.deploy import deploy
from pyinfra.api.operation import OperationMeta
from pyinfra.context import host
from pyinfra.facts.server import Command
from pyinfra.operations import files, server

from provision import templates, units
from provision.hostplan import HostPlan


def systemd_version() -> int:
    """systemd's version on the host (0 if unknown)."""
    m = re.match(r"systemd (\d+)", host.get_fact(Command, command="systemctl --version") or "")
    return int(m.group(1)) if m else 0


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
    facts = {"systemd_version": systemd_version(), "nvidia_persistenced": units.has_persistenced()}
    changed: dict[str, bool] = {}
    for p in plan.stack.profiles:
        profile = dataclasses.asdict(p)
        env = templates.render(
            "llama_server",
            "llama-server.env.j2",
            profile=profile,
            api_key=plan.secrets.get(p.name, ""),
        )
        env_op = units.put_secret(
            f"EnvironmentFile of {p.name} (0600)", env, f"{config_dir}/{p.name}.env"
        )
        unit = templates.render(
            "llama_server", "llama-server.service.j2", profile=profile, **v, **facts
        )
        unit_op = files.put(
            name=f"Unit {p.unit}", src=StringIO(unit), dest=f"{units.UNITS}/{p.unit}", mode="644"
        )
        changed[p.unit] = bool(env_op.changed or unit_op.changed)
    units.converge(
        changed, "gpuprov-llama-*.service", "profile", config_dir, restart_all=binary is not None
    )
