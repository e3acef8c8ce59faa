"""The stack a host runs, read from its inventory data and the roles' defaults, and validated.

Host data uses the same flat variable names as the roles' ``defaults/main.yml`` so one inventory
vocabulary serves pyinfra and Ansible. Validation is pure: a bad value raises ``StackError``
naming the field, before any host is touched. Each role's settings are read in
provision.settings.<role>; this module puts them together.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from provision.role_table import defaults, role_path
from provision.settings import (
    canary,
    llama_cpp,
    llama_server,
    nginx_lb,
    nvidia_container_toolkit,
    read,
    vllm,
)
from provision.settings.canary import Canary
from provision.settings.llama_cpp import Source
from provision.settings.llama_server import Profile
from provision.settings.nginx_lb import Balancer
from provision.settings.nvidia_container_toolkit import Toolkit
from provision.settings.read import StackError
from provision.settings.vllm import Replica, Vllm, replica

__all__ = [
    "Balancer",
    "Canary",
    "Profile",
    "Replica",
    "Source",
    "Stack",
    "StackError",
    "Toolkit",
    "Vllm",
    "defaults",
    "from_data",
    "replica",
    "role_path",
    "unknown",
    "variables",
]

# Variables that are paths on the host: each absolute, without spaces (units name them unquoted).
PATH_SETTINGS = (
    "llama_server_config_dir",
    "llama_cpp_ccache_dir",
    "canary_script",
    "canary_config",
    "canary_state_dir",
    "vllm_model_cache",
    "vllm_config_dir",
    "nvidia_container_toolkit_cdi_spec",
    "nvidia_container_toolkit_docker_config",
    "nginx_lb_conf",
)


@dataclass(frozen=True)
class Stack:
    """Everything gpuprov converges on one host."""

    source: Source
    prefix: str
    cuda_architectures: str
    cuda_compiler: str
    cmake_args: tuple[str, ...]
    build_jobs: int
    install_toolchain: bool
    profiles: tuple[Profile, ...] = ()
    canary: Canary = field(default_factory=Canary)
    server_user: str = "gpuprov-llama"
    server_startup: int = 300  # seconds a llama-server may take to answer after a start
    vllm: Vllm = field(default_factory=Vllm)
    balancer: Balancer = field(default_factory=Balancer)
    toolkit: Toolkit = field(default_factory=Toolkit)

    @property
    def builds_llama(self) -> bool:
        """llama.cpp is built where it serves something (or where no vLLM replica is planned)."""
        return bool(self.profiles) or not self.vllm.replicas


def variables(data: Mapping[str, Any]) -> dict[str, Any]:
    """Defaults overlaid with the host's data (only the names the roles define)."""
    base = dict(defaults())
    base.update({k: v for k, v in data.items() if k in base})
    return base


def unknown(data: Mapping[str, Any], ignore: Collection[str] = ()) -> dict[str, str]:
    """Top-level keys of `data` that no role defines and `ignore` does not hold, each with the
    closest name a role defines ("" when none is close): a typo there is otherwise ignored."""
    known = defaults()
    return {
        key: next(iter(difflib.get_close_matches(key, list(known), n=1)), "")
        for key in sorted(k for k in data if isinstance(k, str))
        if key not in known and key not in ignore
    }


def from_data(data: Mapping[str, Any]) -> Stack:
    """Validate a host's data into a Stack; raise StackError naming the bad field."""
    v = variables(data)
    source = llama_cpp.source(v)
    for key in PATH_SETTINGS:
        read.unit_path(v, key)
    stack = Stack(
        source=source,
        prefix=read.safe_path(v, "llama_cpp_prefix"),
        cuda_architectures=llama_cpp.architectures(v),
        cuda_compiler=llama_cpp.compiler(v),
        cmake_args=read.strings(v, "llama_cpp_cmake_args"),
        build_jobs=read.integer(v, "llama_cpp_build_jobs", 0, 1024),
        install_toolchain=read.boolean(v, "build_toolchain_install"),
        profiles=llama_server.profiles(v),
        canary=canary.parse(v),
        server_user=read.name(v, "llama_server_user"),
        server_startup=llama_server.startup(v),
        vllm=vllm.parse(v),
        balancer=nginx_lb.parse(v),
        toolkit=nvidia_container_toolkit.parse(v),
    )
    _unique_ports(stack)
    return stack


def _unique_ports(stack: Stack) -> None:
    """Every server of the host listens on its own port, an on-demand one's backend port too."""
    used: dict[int, str] = {}
    claims = [(p.port, f"llama_server_profiles ({p.name})") for p in stack.profiles]
    claims += [(r.port, f"vllm_replicas ({r.name})") for r in stack.vllm.replicas]
    claims += [
        (s.backend_port, f"{kind} ({s.name}).backend_port")
        for kind, servers in (
            ("llama_server_profiles", stack.profiles),
            ("vllm_replicas", stack.vllm.replicas),
        )
        for s in servers
        if s.on_demand
    ]
    if stack.balancer.enabled:
        claims.append((stack.balancer.listen, "nginx_lb_listen"))
    for port, owner in claims:
        if port in used:
            raise StackError(owner, f"port {port} is already used by {used[port]}")
        used[port] = owner
