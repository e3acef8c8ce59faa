"""pyinfra tasks of the nvidia_container_toolkit role (Ansible: tasks/main.yml).

Installs the toolkit from NVIDIA's apt repository when nvidia-ctk is missing, then registers the
nvidia runtime with Docker or writes a CDI spec. Whenever it changed something, the container
probes run again on the host and the host fails if CTR-004 or CTR-005 still fire; a rerun on a
converged host adds no operation.
"""

from __future__ import annotations

from pyinfra import logger
from pyinfra.api.command import QuoteString, StringCommand
from pyinfra.api.deploy import deploy
from pyinfra.api.host import Host
from pyinfra.api.operation import OperationMeta
from pyinfra.api.state import State
from pyinfra.context import ctx_host, host, state
from pyinfra.facts.files import File, FileContents
from pyinfra.facts.server import Which
from pyinfra.operations import files, python, server

from checks.facts.model import HostFacts
from provision import host_shell, retry, stack, toolkit
from provision.hostplan import HostPlan

FILES = stack.role_path("nvidia_container_toolkit", "files")


@deploy("NVIDIA Container Toolkit")
def nvidia_container_toolkit(plan: HostPlan) -> None:
    v, facts = plan.variables, plan.gate.facts
    ops: list[OperationMeta] = []
    if not _installed(facts):
        if not v["nvidia_container_toolkit_install"]:
            _refuse(toolkit.not_installed_message(plan.name))
            return
        if not host.get_fact(Which, command="apt-get"):
            _refuse(toolkit.no_apt_message(plan.name))
            return
        try:
            packages = toolkit.package_commands(v["nvidia_container_toolkit_version"])
        except toolkit.ToolkitError as exc:
            _refuse(f"{plan.name}: {exc}")
            return
        ops += _install(toolkit.repository_commands(v["nvidia_container_toolkit_repo"]), packages)
    mode = v["nvidia_container_toolkit_mode"]
    if mode == "docker":
        ops += _docker(facts, v["nvidia_container_toolkit_docker_config"])
    elif mode == "cdi":
        ops += _cdi(facts, v["nvidia_container_toolkit_cdi_spec"])
    if ops:
        python.call(
            name=f"Check that containers reach the GPU ({', '.join(toolkit.rules_for(mode))})",
            function=recheck,
            base=facts,
            mode=mode,
        )


def _installed(facts: HostFacts) -> bool:
    """nvidia-ctk, the runtime hook, or a Docker that already runs the nvidia runtime."""
    ctr = facts.containers
    if ctr.toolkit_version or ctr.runtime_hook or toolkit.docker_has_nvidia(facts):
        return True
    return bool(host.get_fact(Which, command="nvidia-ctk"))


def _refuse(message: str) -> None:
    """Fail this host before anything changes on it."""
    host.log_styled(message, fg="red", log_func=logger.error)
    state.fail_hosts({ctx_host.get()})


def _install(repository: list[str], packages: list[str]) -> list[OperationMeta]:
    return [
        server.shell(
            name="Add NVIDIA's container toolkit apt repository",
            commands=repository,
            _retries=retry.ATTEMPTS,
            _retry_delay=retry.DELAY,
        ),
        server.shell(
            name="Install the NVIDIA Container Toolkit",
            commands=packages,
            _retries=retry.ATTEMPTS,
            _retry_delay=retry.DELAY,
        ),
    ]


def _docker(facts: HostFacts, config: str) -> list[OperationMeta]:
    live = toolkit.docker_has_nvidia(facts)
    if live is None:
        lines = host.get_fact(FileContents, path=config)
        live = toolkit.daemon_config_has_nvidia("\n".join(lines) if lines is not None else None)
    if live:
        return []
    files.put(
        name="Install the Docker configuration script",
        src=str(FILES / "gpuprov-ctk-configure.sh"),
        dest=toolkit.SCRIPT,
        mode="755",
        create_remote_dir=True,
    )
    return [
        server.shell(
            name="Register the nvidia runtime with Docker",
            commands=[toolkit.configure_command(config)],
        )
    ]


def _cdi(facts: HostFacts, spec: str) -> list[OperationMeta]:
    listed = facts.containers.cdi_specs
    present = (listed is not None and spec in listed) or bool(host.get_fact(File, path=spec))
    recorded = host.get_fact(FileContents, path=f"{spec}.driver") if present else None
    driver = facts.driver.version
    action = toolkit.cdi_action(present, "\n".join(recorded or []) or None, driver)
    if not action:
        return []
    what = f"the CDI spec {spec}"
    name = f"Generate {what}" if action == "generate" else f"Regenerate {what} for driver {driver}"
    return [server.shell(name=name, commands=toolkit.cdi_commands(spec, driver))]


def recheck(state: State, host: Host, base: HostFacts, mode: str) -> bool:
    """Run the container probes on the host now; False (the host fails, the message says why)
    while the mode's rules (toolkit.rules_for) still fire on what they find."""
    command = StringCommand("sh", "-c", QuoteString(toolkit.PROBE_SCRIPT))
    _, output = host_shell.run(host, command)
    text = "\n".join(output.stdout_lines) + "\n"
    found = toolkit.problems(base, toolkit.fresh_facts(text, host.name), mode)
    if found:
        host.log_styled(toolkit.failure_message(host.name, found), fg="red", log_func=logger.error)
        return False
    return True
