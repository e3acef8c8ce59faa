"""What the gate reads on a host about the services it plans, beyond the probes.

Model configs (config.json of local models, or of Hugging Face snapshots already in the host's
cache), the GGUF header and whether it is readable of each model, mmproj and draft model file
the profiles name, the llama-server the profiles will run (its --version and --help: the
planned build's if it is built, else the one `current` points at), and the vLLM image if it is
already pulled: one framed script, one round trip, each part unknown (None) when it cannot be read.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from checks.facts import remote
from checks.facts.model import HostFacts, LlamaServer
from checks.facts.parsers import sections
from checks.facts.probe import Probe
from checks.matrix import engine, registry
from checks.services import gguf_header, llama_server_args
from checks.services.gguf_header import GgufInfo
from checks.services.llama_server_help import Options, Version, parse_help, parse_version
from provision.settings import llama_server
from provision.stack import Replica, Stack

# The evaluator of the rules about what a llama-server build refuses (LCPP-009, LCPP-010).
REFUSED = "llama_server_refused"


@dataclass(frozen=True)
class ServerBinary:
    """The llama-server binary whose --help was read; `planned` when it is the planned build's."""

    path: str
    planned: bool
    version: Version
    options: Options

    @property
    def label(self) -> str:
        """ "b7895 (a1b2c3d)", or where it is when it does not say its version."""
        return self.version.label() or f"at {self.path}"


@dataclass
class ServiceFacts:
    configs: dict[str, str | None] = field(default_factory=dict)  # by replica name
    gguf: dict[str, str | None] = field(default_factory=dict)  # by model, mmproj or draft path
    inspect: str | None = None  # `docker image inspect` of the planned image
    files: dict[str, bool | None] = field(default_factory=dict)  # readable, by path
    binary: ServerBinary | None = None  # the llama-server the profiles will run


def config_command(r: Replica, model_cache: str) -> str:
    """Print the replica's config.json: the local model's, or the first cached snapshot's."""
    if r.local_model:
        return f"cat -- {shlex.quote(r.model.rstrip('/') + '/config.json')}"
    folder = "models--" + r.model.replace("/", "--")
    pattern = f"{shlex.quote(model_cache.rstrip('/') + '/hub/' + folder)}/snapshots/*/config.json"
    return f'for f in {pattern}; do [ -f "$f" ] && exec cat -- "$f"; done; exit 1'


def inspect_command(engine: str, image: str) -> str:
    return f"{shlex.quote(engine)} image inspect {shlex.quote(image)}"


def binary_command(prefix: str, build: str) -> str:
    """Which llama-server the profiles will run (the planned build `build` once it is built, else
    `current`), then its --version and --help, in sections."""
    planned = f"{prefix}/builds/{build}"
    current = f"{prefix}/current/bin/llama-server"
    choose = (
        f"if [ -n {shlex.quote(build)} ] && [ -f {shlex.quote(planned + '/.complete')} ]"
        f" && [ -x {shlex.quote(planned + '/bin/llama-server')} ]; then"
        f" b={shlex.quote(planned + '/bin/llama-server')}; w=planned;"
        f" elif [ -x {shlex.quote(current)} ]; then"
        f" b=$(readlink -f {shlex.quote(current)}) || b={shlex.quote(current)}; w=current;"
        " else echo '### gpuprov:binary none'; exit 0; fi"
    )
    return (
        f'{choose}; echo "### gpuprov:binary $w $b"; echo "### gpuprov:version";'
        ' "$b" --version </dev/null 2>&1; echo "### gpuprov:help"; "$b" --help </dev/null 2>&1;'
        " exit 0"
    )


def parse_binary(text: str) -> ServerBinary | None:
    """The binary `binary_command` found, with what it printed; None when there is none."""
    parts = {s.name: s for s in sections.split(text)}
    where = parts.get("binary")
    which, _, path = (where.argument or "").partition(" ") if where else ("", "", "")
    if which not in ("planned", "current") or not path:
        return None
    version, help_text = parts.get("version"), parts.get("help")
    return ServerBinary(
        path=path,
        planned=which == "planned",
        version=parse_version(version.text) if version else Version(),
        options=parse_help(help_text.text) if help_text else Options(),
    )


def servers(
    profiles: Iterable[Mapping[str, Any]],
    binary: ServerBinary | None = None,
    files: Mapping[str, bool | None] | None = None,
) -> list[LlamaServer]:
    """Each profile's llama-server as llama.cpp reads its arguments (settings, then extra_args);
    with `binary`, the llama-server read on the host, also what that build refuses; with
    `files`, which of its files the host could not read. A profile is a Profile's asdict() or
    Ansible's merged dict."""
    out = []
    for p in profiles:
        options = binary.options if binary is not None else None
        argv = llama_server.args(p)
        server = llama_server_args.server(p["name"], argv, options, mlock=bool(p.get("mlock")))
        if binary is not None:
            server.build, server.build_planned = binary.label, binary.planned
        if files:
            paths = [getattr(server, key) for key, _ in llama_server_args.FILES]
            tested = [path for path in paths if path and files.get(path) is not None]
            if tested:
                server.missing_files = [path for path in tested if not files[path]]
        out.append(server)
    return out


def refusals(found: Sequence[LlamaServer]) -> list[str]:
    """The findings' messages of the rules on what a build refuses ("profile NAME: llama-server
    b7895 does not accept --mlock: ..."), for servers read with their build."""
    rules = tuple(r for r in registry.routed("planned-services") if r.check == REFUSED)
    return [f.message for f in engine.evaluate(HostFacts(llama_servers=list(found)), rules)]


def refused_filter(output: str, profiles: Sequence[Mapping[str, Any]]) -> list[str]:
    """Jinja filter: `binary_command`'s output | llama_server_refused(profiles)."""
    binary = parse_binary(output)
    if binary is None or not binary.options.options:
        return []
    return refusals(servers(profiles, binary))


def model_files(stack: Stack) -> list[tuple[str, str]]:
    """(field, absolute path) of each model, mmproj and draft model file a profile names, as its
    arguments set them (extra_args included; the last occurrence wins)."""
    out = []
    for p in stack.profiles:
        found = llama_server_args.settings(p.args())
        for key, _ in llama_server_args.FILES:
            path = found.get(key)
            if path and path.startswith("/"):
                out.append((key, path))
    return out


def headers(
    found: ServiceFacts, server: LlamaServer
) -> tuple[GgufInfo | None, GgufInfo | None, GgufInfo | None]:
    """The GGUF headers read on the host of the model, the projector and the draft model
    `server` names, each None when it names none or it was not read."""

    def read(path: str | None) -> GgufInfo | None:
        text = found.gguf.get(path) if path else None
        return gguf_header.parse_remote(text) if text else None

    return read(server.model), read(server.mmproj), read(server.model_draft)


def _keep(text: str) -> HostFacts:  # framing only: these outputs are read by the gate
    return HostFacts()


def reads(stack: Stack, image: str, build: str = "") -> list[tuple[str, str, str]]:
    """(kind, key, command) for everything the gate wants to read on this host; `build` names
    the planned llama.cpp build."""
    out = [
        ("config", r.name, config_command(r, stack.vllm.model_cache)) for r in stack.vllm.replicas
    ]
    files = model_files(stack)
    out += [("gguf", p, gguf_header.remote_command(p)) for p in dict.fromkeys(p for _, p in files)]
    out += [("file", p, f"test -r {shlex.quote(p)}") for p in dict.fromkeys(p for _, p in files)]
    if stack.profiles:
        out.append(("binary", build, binary_command(stack.prefix, build)))
    if image:
        out.append(("inspect", image, inspect_command(stack.vllm.engine, image)))
    return out


def script(stack: Stack, image: str, build: str = "") -> str:
    return remote.script(
        [Probe(key, cmd, _keep, timeout=30) for _, key, cmd in reads(stack, image, build)]
    )


def parse(stack: Stack, image: str, output: str, build: str = "") -> ServiceFacts:
    """What each read printed, when it succeeded (exit 0); a file test that ran says False."""
    status, bodies = remote.frames(output)
    found = ServiceFacts()
    for i, (kind, key, _) in enumerate(reads(stack, image, build)):
        done = status.get(i) == "ok"
        ok = done and (kind in ("gguf", "binary") or _exit_ok(output, i))
        body = bodies.get(i) if ok else None
        if kind == "config":
            found.configs[key] = body
        elif kind == "gguf":
            found.gguf[key] = body
        elif kind == "file":
            found.files[key] = ok if done else None
        elif kind == "binary":
            found.binary = parse_binary(body) if body is not None else None
        else:
            found.inspect = body
    return found


def _exit_ok(output: str, index: int) -> bool:
    return f"{remote.MARK} {index} end 0\n" in output + "\n"


FILTERS = {"llama_server_binary_command": binary_command, "llama_server_refused": refused_filter}
