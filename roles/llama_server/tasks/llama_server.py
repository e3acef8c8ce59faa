"""pyinfra tasks of the llama_server role (Ansible: tasks/main.yml).

One unit per profile. A server restarts only when its unit, its EnvironmentFile or the binary
changed; units of profiles no longer in the inventory are stopped and removed, with their
EnvironmentFiles. When llama.cpp was just built (or `current` switched), the new binary's --help
is checked against every profile's arguments first: an argument it refuses fails the host before
any unit is written (`apply --force` skips the check, as it overrides the gate). A host that cannot
run the on-demand profiles (no systemd-socket-proxyd, systemd before 246) fails before anything
is written, whatever --force says (provision/units.py on_demand_proxyd).
"""

from __future__ import annotations

import dataclasses

from pyinfra import logger
from pyinfra.api.command import StringCommand
from pyinfra.api.deploy import deploy
from pyinfra.api.host import Host
from pyinfra.api.operation import OperationMeta
from pyinfra.api.state import State
from pyinfra.operations import files, python, server

from provision import gate, host_shell, servicefacts, stack, templates, units
from provision.hostplan import HostPlan
from provision.servicefacts import ServiceFacts
from provision.settings import residency

FILES = stack.role_path("llama_server", "files")
WHAT = "llama.cpp server"  # in the descriptions of an on-demand profile's socket and proxy


def check_arguments(state: State, host: Host, plan: HostPlan) -> bool:
    """Read the built llama-server's --help now; False (the host fails, each refusal logged)
    when it refuses an argument of a profile, or cannot lock a model that mlock asks for."""
    build = plan.gate.plan.name if plan.gate.plan is not None else ""
    command = StringCommand(servicefacts.binary_command(plan.stack.prefix, build))
    _, output = host_shell.run(host, command)
    binary = servicefacts.parse_binary("\n".join(output.stdout_lines) + "\n")
    if binary is None or not binary.options.options:
        where = binary.path if binary is not None else f"{plan.stack.prefix}/current"
        host.log_styled(
            f"llama-server at {where} listed no options for --help: arguments not checked",
            fg="yellow",
            log_func=logger.warning,
        )
        return True
    found = servicefacts.refusals(gate.planned_servers(plan.stack, ServiceFacts(binary=binary)))
    for message in found:
        host.log_styled(message, fg="red", log_func=logger.error)
    return not found


@deploy("llama.cpp servers")
def llama_server(plan: HostPlan, binary: OperationMeta | None) -> None:
    v = plan.variables
    on_demand = [p for p in plan.stack.profiles if p.on_demand]
    proxyd = units.on_demand_proxyd("llama_server_profiles", [p.name for p in on_demand])
    if proxyd is None:  # the host cannot run them: it failed, saying why
        return
    if binary is not None and not plan.force:
        python.call(
            name="Check the profiles' arguments against the new llama-server",
            function=check_arguments,
            plan=plan,
        )
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
    facts = units.unit_facts()
    extra = {"llama_server_socket_proxyd": proxyd} if on_demand else {}
    planned = []
    for p in plan.stack.profiles:
        profile = dataclasses.asdict(p)
        env = templates.render(
            "llama_server",
            "llama-server.env.j2",
            profile=profile,
            api_key=plan.secrets.get(p.name, ""),
        )
        peers = residency.swap_peers(p, on_demand)
        variables = {**v, **facts, **extra, "llama_server_swap_peers": peers}
        unit = templates.render(
            "llama_server", "llama-server.service.j2", profile=profile, **variables
        )
        planned.append(units.Planned(p, profile, env, unit))
    units.serve(_role(plan), planned, proxyd, restart_all=binary is not None)


def _role(plan: HostPlan) -> units.Role:
    wait = (str(FILES / "gpuprov-wait-ready.py"), plan.variables["llama_server_wait_ready"])
    config_dir = plan.variables["llama_server_config_dir"]
    return units.Role(WHAT, "profile", "servers", "gpuprov-llama-*", config_dir, wait)


@deploy("llama.cpp servers removed")
def remove(plan: HostPlan) -> None:
    """No profile is planned any more (vLLM replicas serve instead): stop and remove every
    llama-server unit and EnvironmentFile an earlier apply installed."""
    units.converge({}, "gpuprov-llama-*", "profile", plan.variables["llama_server_config_dir"])


@deploy("llama.cpp servers uninstalled")
def uninstall(plan: HostPlan) -> None:
    """`gpuprov uninstall`: every server's unit and EnvironmentFile, their folder and user."""
    config_dir = plan.variables["llama_server_config_dir"]
    units.converge({}, "gpuprov-llama-*", "profile", config_dir)
    units.remove_folder(config_dir)
    server.user(name="Remove the servers' system user", user=plan.stack.server_user, present=False)
