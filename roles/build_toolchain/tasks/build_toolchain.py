"""pyinfra tasks of the build_toolchain role (Ansible: tasks/main.yml)."""

from __future__ import annotations

from pyinfra.api.deploy import deploy
from pyinfra.context import host
from pyinfra.facts.deb import DebPackages
from pyinfra.facts.files import File
from pyinfra.operations import apt, server

from provision import build, retry
from provision.hostplan import HostPlan


@deploy("Build toolchain")
def build_toolchain(plan: HostPlan) -> None:
    if not plan.stack.install_toolchain:
        return
    installed = host.get_fact(DebPackages) or {}
    missing = [p for p in plan.variables["build_toolchain_packages"] if p not in installed]
    if missing:
        apt.packages(
            name="Install build packages",
            packages=missing,
            update=True,
            _retries=retry.ATTEMPTS,
            _retry_delay=retry.DELAY,
        )
    release = plan.gate.install_cuda
    if not release:
        return
    system = plan.gate.facts.system
    repo = build.cuda_repo(system.os_id, system.os_version, system.machine)
    if not host.get_fact(File, path="/usr/share/keyrings/cuda-archive-keyring.gpg"):
        server.shell(
            name="Add NVIDIA's CUDA apt repository",
            commands=[build.cuda_keyring_command(repo)],
            _retries=retry.ATTEMPTS,
            _retry_delay=retry.DELAY,
        )
    apt.packages(
        name=f"Install CUDA toolkit {release}",
        packages=[f"cuda-toolkit-{release.replace('.', '-')}"],
        update=True,
        _retries=retry.ATTEMPTS,
        _retry_delay=retry.DELAY,
    )
