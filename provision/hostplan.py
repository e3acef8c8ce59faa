"""What one host gets: its validated stack, the roles' variables, the gate's verdict, secrets."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from provision.gate import HostGate
from provision.stack import Stack, StackError


@dataclass
class HostPlan:
    name: str
    stack: Stack
    variables: dict[str, Any]
    gate: HostGate
    secrets: dict[str, str] = field(default_factory=dict)


def secrets(stack: Stack, environ: dict[str, str] | None = None) -> dict[str, str]:
    """API keys by profile name, read from this machine's environment; never from the inventory."""
    env = os.environ if environ is None else environ
    found = {}
    for i, p in enumerate(stack.profiles):
        if not p.api_key_env:
            continue
        value = env.get(p.api_key_env, "")
        if not value:
            raise StackError(
                f"llama_server_profiles[{i}].api_key_env",
                f"environment variable {p.api_key_env} is not set on this machine",
            )
        found[p.name] = value
    return found
