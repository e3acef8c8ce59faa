"""What one host gets: its validated stack, the roles' variables, the gate's verdict, secrets."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from provision import envsecrets
from provision.gate import HostGate
from provision.settings import read
from provision.stack import Stack, StackError


@dataclass
class HostPlan:
    name: str
    stack: Stack
    variables: dict[str, Any]
    gate: HostGate
    secrets: dict[str, str] = field(default_factory=dict)
    # Set while operations are generated: how the balancer config nginx serves would change (a
    # unified diff), which pyinfra cannot show since a script installs it (roles/nginx_lb).
    balancer_diff: str | None = None
    # `apply --force`: the user overrides the gate, and the roles skip their own checks of it.
    force: bool = False
    # `--prune-builds N`: keep the newest N llama.cpp builds and the one in use; 0 keeps all.
    prune_builds: int = 0


def secrets(stack: Stack, environ: dict[str, str] | None = None) -> dict[str, str]:
    """Secrets read from this machine's environment, never from the inventory.

    Keys: a llama.cpp profile's name (its API key), or "vllm/<replica>/HF_TOKEN" and
    "vllm/<replica>/VLLM_API_KEY".
    """
    env = os.environ if environ is None else environ
    wanted = [
        (p.name, f"llama_server_profiles[{i}].api_key_env", p.api_key_env)
        for i, p in enumerate(stack.profiles)
    ]
    for i, r in enumerate(stack.vllm.replicas):
        where = f"vllm_replicas[{i}]"
        wanted.append((f"vllm/{r.name}/HF_TOKEN", f"{where}.hf_token_env", r.hf_token_env))
        wanted.append((f"vllm/{r.name}/VLLM_API_KEY", f"{where}.api_key_env", r.api_key_env))
    found = {}
    for key, field_name, variable in wanted:
        if not variable:
            continue
        value = envsecrets.remember(env.get(variable, ""))
        if not value:
            raise StackError(
                field_name, f"environment variable {variable} is not set on this machine"
            )
        if read.unwritable(value):  # never shown: it is the secret (a line break, a bad byte)
            raise StackError(
                field_name, f"environment variable {variable} holds a control character"
            )
        found[key] = value
    return found
