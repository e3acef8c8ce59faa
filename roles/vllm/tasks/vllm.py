"""pyinfra tasks of the vllm role (Ansible: tasks/main.yml).

One unit per replica, each running its container in the foreground so systemd supervises it. The
image is pulled (with docker's progress) only when missing, then checked against the driver before
any unit starts: a container that would die with "unsatisfied condition" or Error 804 never runs.
A replica restarts only when its unit or EnvironmentFile changed; replicas no longer in the
inventory are stopped and removed, with their EnvironmentFiles. An on-demand replica gets a
socket and a proxy unit too (llama_server's templates, as its on-demand profiles do) and is never
started here: the first connection starts it. A host that cannot run the on-demand replicas (no
systemd-socket-proxyd, systemd before 246) fails before anything is written.
"""

from __future__ import annotations

import dataclasses
import shlex

from pyinfra.api.command import StringCommand
from pyinfra.api.deploy import deploy
from pyinfra.context import host
from pyinfra.operations import files, python, server

from checks.services import vllm_images
from provision import host_shell, retry, servicefacts, stack, templates, units
from provision.hostplan import HostPlan
from provision.settings import residency

# One readiness wait for both roles' on-demand servers: the llama_server role's file.
WAIT_READY = stack.role_path("llama_server", "files", "gpuprov-wait-ready.py")
WHAT = "vLLM replica"  # in the descriptions of an on-demand replica's socket and proxy


class PreflightError(RuntimeError):
    """The pulled image cannot run on this host's driver."""


def preflight(plan: HostPlan, image: str) -> None:
    """Read the pulled image's environment and refuse it if the driver cannot run it."""
    command = servicefacts.inspect_command(plan.stack.vllm.engine, image)
    ok, output = host_shell.run(host, StringCommand(command))
    text = "\n".join(line for line in output.stdout_lines) if ok else ""
    found = vllm_images.image_from_inspect(text) if text else None
    if found is None:
        raise PreflightError(f"{image}: `image inspect` after the pull printed no image")
    errors = [f for f in vllm_images.preflight(plan.gate.facts, found) if f.severity == "error"]
    if errors:
        detail = "; ".join(f"{f.rule} {f.message} Fix: {f.fix}" for f in errors)
        raise PreflightError(f"{image} would not start on this host: {detail}")


@deploy("vLLM replicas")
def vllm(plan: HostPlan) -> None:
    v = plan.variables
    settings = plan.stack.vllm
    image = plan.gate.image
    on_demand = [r for r in settings.replicas if r.on_demand]
    proxyd = units.on_demand_proxyd("vllm_replicas", [r.name for r in on_demand])
    if proxyd is None:  # the host cannot run them: it failed, saying why
        return
    planned = []
    if settings.replicas:
        files.directory(name="Replica config folder", path=settings.config_dir, mode="755")
        files.directory(name="Model cache", path=settings.model_cache, mode="755")
        if not plan.gate.image_present:
            server.shell(
                name=f"Pull {image}",
                commands=[f"{shlex.quote(settings.engine)} pull {shlex.quote(image)}"],
                _retries=retry.ATTEMPTS,
                _retry_delay=retry.DELAY,
            )
            python.call(
                name=f"Check {image} against the driver", function=preflight, plan=plan, image=image
            )
        facts = units.unit_facts()
        for r in settings.replicas:
            replica = dataclasses.asdict(r)
            env = templates.render(
                "vllm",
                "vllm.env.j2",
                replica=replica,
                hf_token=plan.secrets.get(f"vllm/{r.name}/HF_TOKEN", ""),
                api_key=plan.secrets.get(f"vllm/{r.name}/VLLM_API_KEY", ""),
            )
            unit = templates.render(
                "vllm",
                "vllm.service.j2",
                replica=replica,
                image=image,
                vllm_swap_peers=residency.swap_peers(r, on_demand),
                **v,
                **facts,
            )
            planned.append(units.Planned(r, replica, env, unit))
    wait = (str(WAIT_READY), v["vllm_wait_ready"])
    role = units.Role(WHAT, "replica", "replicas", "gpuprov-vllm-*", settings.config_dir, wait)
    units.serve(role, planned, proxyd)


@deploy("vLLM replicas removed")
def uninstall(plan: HostPlan) -> None:
    """`gpuprov uninstall`: every replica's unit and EnvironmentFile (its container is --rm).
    The model cache and the pulled images stay: models are the user's."""
    config_dir = plan.stack.vllm.config_dir
    units.converge({}, "gpuprov-vllm-*", "replica", config_dir)
    units.remove_folder(config_dir)
