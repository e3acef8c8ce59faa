"""The llama_server role's settings: its profiles, one llama-server unit each, and the arguments
each unit runs llama-server with (one source for both engines: Ansible reaches `args` through the
`llama_server_args` filter)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from checks.services.llama_server_help import MLOCK_ENV
from provision.settings import read, residency
from provision.settings.read import StackError

CACHE_TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")
FLASH_ATTN = ("on", "off", "auto")
LAYERS = ("auto", "all")


@dataclass(frozen=True)
class Profile:
    """One llama-server instance: one systemd unit."""

    name: str
    model: str
    alias: str
    port: int
    host: str = "127.0.0.1"
    ctx_size: int = 4096
    parallel: int = 1
    gpu_layers: str = ""
    flash_attn: str = "auto"
    cache_type_k: str = "f16"
    cache_type_v: str = "f16"
    mlock: bool = False
    threads: int = 0
    api_key_env: str = ""
    extra_args: tuple[str, ...] = ()
    # resident: always running. on_demand: systemd owns `port` (a .socket unit) and starts the
    # server on the first connection; it stops after idle_seconds without one. A swap_group's
    # members are on demand, and at most one of them runs.
    residency: str = "resident"
    idle_seconds: int = 600
    swap_group: str = ""
    backend_port: int = 0  # where an on-demand server listens (loopback), behind the socket
    metrics: bool = False  # --metrics: Prometheus /metrics where the server listens

    @property
    def unit(self) -> str:
        return f"gpuprov-llama-{self.name}.service"

    @property
    def on_demand(self) -> bool:
        return self.residency == "on_demand"

    @property
    def socket_unit(self) -> str:
        return f"gpuprov-llama-{self.name}.socket"

    @property
    def proxy_unit(self) -> str:
        return f"gpuprov-llama-{self.name}-proxy.service"

    def args(self) -> list[str]:
        return args(dataclasses.asdict(self))


def profiles(v: Mapping[str, Any]) -> tuple[Profile, ...]:
    """llama_server_profiles, each over llama_server_defaults; names and ports distinct."""
    raw, base = v.get("llama_server_profiles"), v.get("llama_server_defaults") or {}
    if not isinstance(raw, list):
        raise StackError("llama_server_profiles", "must be a list of profiles")
    if not isinstance(base, Mapping):
        raise StackError("llama_server_defaults", "must be a mapping")
    found: list[Profile] = []
    for i, item in enumerate(raw):
        where = f"llama_server_profiles[{i}]"
        if not isinstance(item, Mapping):
            raise StackError(where, "must be a mapping")
        found.append(_profile(where, {**base, **item}))
    for attr in ("name", "port"):
        seen: set[object] = set()
        for i, p in enumerate(found):
            value = getattr(p, attr)
            if value in seen:
                raise StackError(f"llama_server_profiles[{i}].{attr}", f"duplicate {value!r}")
            seen.add(value)
    residency.check_ports(found, "llama_server_profiles", "profile")
    return tuple(found)


def _profile(where: str, v: Mapping[str, Any]) -> Profile:
    """One profile from its settings (the profile's entry over llama_server_defaults)."""
    read.unknown(v, set(Profile.__dataclass_fields__), where)
    name = read.name(v, "name", where)
    raw_layers = v.get("gpu_layers", "")
    if isinstance(raw_layers, bool):
        raise StackError(f"{where}.gpu_layers", "a number, 'auto' or 'all', got a boolean")
    gpu_layers = "" if raw_layers in (None, "") else str(raw_layers)
    if gpu_layers and not ((gpu_layers.isascii() and gpu_layers.isdigit()) or gpu_layers in LAYERS):
        raise StackError(f"{where}.gpu_layers", f"a number, 'auto' or 'all', got {gpu_layers!r}")
    flash = str(v.get("flash_attn", "auto"))
    if flash not in FLASH_ATTN:
        raise StackError(f"{where}.flash_attn", f"one of {', '.join(FLASH_ATTN)}, got {flash!r}")
    caches = {}
    for key in ("cache_type_k", "cache_type_v"):
        caches[key] = str(v.get(key, "f16"))
        if caches[key] not in CACHE_TYPES:
            raise StackError(f"{where}.{key}", f"one of {', '.join(CACHE_TYPES)}")
    api_key_env = read.env_name(v, "api_key_env", where)
    port = read.integer(v, "port", 1, 65535, where)
    return Profile(
        name=name,
        model=read.absolute(v, "model", where),
        alias=read.text(v, "alias", where) if "alias" in v else name,
        port=port,
        host=read.address(v, "host", where) if "host" in v else "127.0.0.1",
        ctx_size=read.integer(v, "ctx_size", 0, 10_000_000, where) if "ctx_size" in v else 4096,
        parallel=read.integer(v, "parallel", 1, 1024, where) if "parallel" in v else 1,
        gpu_layers=gpu_layers,
        flash_attn=flash,
        cache_type_k=caches["cache_type_k"],
        cache_type_v=caches["cache_type_v"],
        mlock=read.boolean(v, "mlock", where) if "mlock" in v else False,
        threads=read.integer(v, "threads", 0, 4096, where) if "threads" in v else 0,
        api_key_env=api_key_env,
        extra_args=read.strings(v, "extra_args", where) if "extra_args" in v else (),
        metrics=read.boolean(v, "metrics", where) if "metrics" in v else False,
        **residency.parse(v, where, port).fields(),
    )


def startup(v: Mapping[str, Any]) -> int:
    """Seconds a server may take to answer a completion after a start."""
    return read.integer(v, "llama_server_startup_seconds", 1, 86400)


def args(profile: Mapping[str, Any]) -> list[str]:
    """llama-server's arguments for a profile (a Profile's asdict(), or Ansible's merged dict):
    the settings, then extra_args. `mlock` is not among them: llama.cpp replaced --mlock by
    --load-mode, so the EnvironmentFile sets it for either (`env`)."""
    host, port = listen(profile)
    out = [
        *("--model", str(profile["model"]), "--alias", str(profile["alias"])),
        *("--host", host, "--port", str(port)),
        *("--ctx-size", str(profile["ctx_size"]), "--parallel", str(profile["parallel"])),
        *("--flash-attn", str(profile["flash_attn"])),
        *("--cache-type-k", str(profile["cache_type_k"])),
        *("--cache-type-v", str(profile["cache_type_v"])),
    ]
    layers = profile.get("gpu_layers")
    if layers is not None and str(layers) != "":
        out += ["--n-gpu-layers", str(layers)]
    if profile.get("threads"):
        out += ["--threads", str(profile["threads"])]
    if profile.get("metrics"):
        out.append("--metrics")
    return out + [str(a) for a in profile.get("extra_args") or ()]


def listen(profile: Mapping[str, Any]) -> tuple[str, int]:
    """Where llama-server itself listens: the profile's host and port, or for an on-demand
    profile the loopback backend port that systemd-socket-proxyd forwards to."""
    return residency.listen(profile)


def env(profile: Mapping[str, Any]) -> list[list[str]]:
    """The non-secret environment of a profile's unit, as [name, value] pairs: mlock."""
    return [list(pair) for pair in MLOCK_ENV] if profile.get("mlock") else []


FILTERS = {"llama_server_args": args, "llama_server_env": env, "llama_server_listen": listen}
