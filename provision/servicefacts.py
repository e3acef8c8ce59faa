"""What the gate reads on a host about the services it plans, beyond the probes.

Model configs (config.json of local models, or of Hugging Face snapshots already in the host's
cache), GGUF headers of llama.cpp models, and the vLLM image if it is already pulled: one framed
script, one round trip, each part unknown (None) when it cannot be read.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from checks.facts import remote
from checks.facts.model import HostFacts
from checks.facts.probe import Probe
from checks.services import gguf_header
from provision.stack import Replica, Stack


@dataclass
class ServiceFacts:
    configs: dict[str, str | None] = field(default_factory=dict)  # by replica name
    gguf: dict[str, str | None] = field(default_factory=dict)  # by model path
    inspect: str | None = None  # `docker image inspect` of the planned image


def config_command(r: Replica, model_cache: str) -> str:
    """Print the replica's config.json: the local model's, or the first cached snapshot's."""
    if r.local_model:
        return f"cat -- {shlex.quote(r.model.rstrip('/') + '/config.json')}"
    folder = "models--" + r.model.replace("/", "--")
    pattern = f"{shlex.quote(model_cache.rstrip('/') + '/hub/' + folder)}/snapshots/*/config.json"
    return f'for f in {pattern}; do [ -f "$f" ] && exec cat -- "$f"; done; exit 1'


def inspect_command(engine: str, image: str) -> str:
    return f"{shlex.quote(engine)} image inspect {shlex.quote(image)}"


def _keep(text: str) -> HostFacts:  # framing only: these outputs are read by the gate
    return HostFacts()


def reads(stack: Stack, image: str) -> list[tuple[str, str, str]]:
    """(kind, key, command) for everything the gate wants to read on this host."""
    out = [
        ("config", r.name, config_command(r, stack.vllm.model_cache)) for r in stack.vllm.replicas
    ]
    out += [("gguf", p.model, gguf_header.remote_command(p.model)) for p in stack.profiles]
    if image:
        out.append(("inspect", image, inspect_command(stack.vllm.engine, image)))
    return out


def script(stack: Stack, image: str) -> str:
    return remote.script(
        [Probe(key, cmd, _keep, timeout=30) for _, key, cmd in reads(stack, image)]
    )


def parse(stack: Stack, image: str, output: str) -> ServiceFacts:
    """What each read printed, when it succeeded (exit 0)."""
    status, bodies = remote.frames(output)
    found = ServiceFacts()
    for i, (kind, key, _) in enumerate(reads(stack, image)):
        ok = status.get(i) == "ok" and (kind == "gguf" or _exit_ok(output, i))
        body = bodies.get(i) if ok else None
        if kind == "config":
            found.configs[key] = body
        elif kind == "gguf":
            found.gguf[key] = body
        else:
            found.inspect = body
    return found


def _exit_ok(output: str, index: int) -> bool:
    return f"{remote.MARK} {index} end 0\n" in output + "\n"
