"""The roles, one row each, in the order both engines run them.

A row names the role's folder (roles/<name>/), the prefix of its variables, when it runs and what
its pyinfra entry takes. `gpuprov apply` runs the rows as they stand; ansible/site.yml lists the
same roles with the same `when` (tests/test_role_table.py holds it to this table).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import yaml

from checks import packaged

# `when` expressions, as Ansible evaluates them on the host's variables. llama.cpp is built where
# it serves something, or where no vLLM replica is planned (Stack.builds_llama for the gate).
BUILDS_LLAMA = (
    "llama_server_profiles | default([]) | length > 0 or vllm_replicas | default([]) | length == 0"
)
HAS_REPLICAS = "vllm_replicas | default([]) | length > 0"


@dataclass(frozen=True)
class Role:
    """One role; its pyinfra entry is `<name>(plan, *results)` in roles/<name>/tasks/<name>.py."""

    name: str
    prefix: str  # every variable of its defaults/main.yml starts with this
    when: str = ""  # a Jinja expression on the host's variables; "" runs on every host
    takes: tuple[str, ...] = ()  # earlier roles whose entries' results its entry takes, in order
    family: str = ""  # a start shared with sibling roles: an unknown name under it is a typo too


ROLES = (
    Role("build_toolchain", "build_toolchain_", BUILDS_LLAMA),
    Role("llama_cpp", "llama_cpp_", BUILDS_LLAMA, family="llama_"),
    Role("llama_server", "llama_server_", BUILDS_LLAMA, takes=("llama_cpp",), family="llama_"),
    Role(
        "nvidia_container_toolkit",
        "nvidia_container_toolkit_",
        HAS_REPLICAS,
        family="nvidia_container_",
    ),
    Role("vllm", "vllm_"),
    Role("nginx_lb", "nginx_lb_"),
    Role("canary", "canary_"),
)
NAMES = tuple(role.name for role in ROLES)
# Host-data names starting with one of these belong to the roles: an unknown one is refused.
PREFIXES = tuple(sorted({p for role in ROLES for p in (role.prefix, role.family) if p}))


def role_path(role: str, *parts: str) -> Path:
    """A file or folder of a role, from the packaged roles (roles/ in the repository)."""
    return packaged.path("provision.roles", role, *parts)


@functools.cache
def defaults() -> Mapping[str, Any]:
    """The roles' defaults/main.yml merged, in role order."""
    merged: dict[str, Any] = {}
    for role in NAMES:
        merged.update(yaml.safe_load(role_path(role, "defaults", "main.yml").read_text()) or {})
    return merged


def runs(role: Role, variables: Mapping[str, Any]) -> bool:
    """Whether `role` runs on a host with these variables: its `when`, as Ansible reads it."""
    if not role.when:
        return True
    value = _expression(role.when)(dict(variables))
    if not isinstance(value, bool):  # Ansible refuses a condition that is not a boolean
        raise TypeError(f"{role.name}: `when: {role.when}` gave {value!r}, not a boolean")
    return value


@functools.cache
def _expression(source: str) -> Callable[..., Any]:
    return jinja2.Environment(undefined=jinja2.StrictUndefined).compile_expression(source)
