"""pyinfra tasks of the llama_cpp role (Ansible: tasks/main.yml).

Builds only when the planned build (named by a hash of source and flags) is not the one `current`
points at; the build script switches `current` only after the new binary runs.
"""

from __future__ import annotations

from pyinfra.api.command import QuoteString, StringCommand
from pyinfra.api.deploy import deploy
from pyinfra.api.operation import OperationMeta
from pyinfra.context import host
from pyinfra.facts.files import File, Link
from pyinfra.facts.server import Command
from pyinfra.operations import files, server

from provision import build, stack, units
from provision.hostplan import HostPlan

FILES = stack.role_path("llama_cpp", "files")
CACHE_ROOT = "/var/cache/gpuprov/"


@deploy("llama.cpp")
def llama_cpp(plan: HostPlan) -> OperationMeta | None:
    """Returns the build operation when a build (or a switch of `current`) is needed. With
    `--prune-builds N`, the builds past the newest N are removed after it (a failed build stops
    the host before them)."""
    stack, chosen = plan.stack, plan.gate.plan
    assert chosen is not None
    files.put(
        name="Install the llama.cpp build script",
        src=str(FILES / "llama-build.sh"),
        dest=build.SCRIPT,
        mode="755",
        create_remote_dir=True,
    )
    if chosen.tarball_remote:
        files.put(
            name="Upload the llama.cpp source tarball",
            src=stack.source.tarball,
            dest=chosen.tarball_remote,
            mode="644",
            create_remote_dir=True,
        )
    built = host.get_fact(File, path=f"{stack.prefix}/builds/{chosen.name}/.complete")
    link = host.get_fact(Link, path=f"{stack.prefix}/current")
    operation = None
    if not (built and link and link.get("link_target") == f"builds/{chosen.name}"):
        argv = build.command(stack, chosen, plan.variables["llama_cpp_ccache_dir"])
        operation = server.shell(
            name=f"Build llama-server {chosen.name}" if not built else f"Switch to {chosen.name}",
            commands=[StringCommand(*(QuoteString(a) for a in argv))],  # type: ignore[list-item]
        )
    if plan.prune_builds > 0:
        listed = host.get_fact(Command, command=build.list_builds_command(stack.prefix)) or ""
        for name in build.prunable(listed.splitlines(), chosen.name, plan.prune_builds):
            files.directory(
                name=f"Remove the old build {name}",
                path=f"{stack.prefix}/builds/{name}",
                present=False,
            )
    return operation


@deploy("llama.cpp builds removed")
def uninstall(plan: HostPlan) -> None:
    """`gpuprov uninstall`: every build, `current`, the sources and work folders under the
    prefix, the build script, and the compiler cache where it is gpuprov's own folder (a cache
    set elsewhere may be shared, and stays)."""
    units.remove_folder(plan.stack.prefix)
    ccache = plan.variables["llama_cpp_ccache_dir"]
    if ccache and ccache.startswith(CACHE_ROOT):
        units.remove_folder(ccache)
    if host.get_fact(File, path=build.SCRIPT):
        files.file(name=f"Remove {build.SCRIPT}", path=build.SCRIPT, present=False)
