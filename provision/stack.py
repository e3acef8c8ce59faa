"""The stack a host runs, read from its inventory data and the roles' defaults, and validated.

Host data uses the same flat variable names as the roles' ``defaults/main.yml`` so one inventory
vocabulary serves pyinfra and Ansible. Validation is pure: a bad value raises ``StackError``
naming the field, before any host is touched.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from checks import packaged

ROLE_NAMES = (
    "build_toolchain",
    "llama_cpp",
    "llama_server",
    "nvidia_container_toolkit",
    "vllm",
    "nginx_lb",
    "canary",
)

NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,40}$")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
CACHE_TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")
FLASH_ATTN = ("on", "off", "auto")
SAFE_PATH = re.compile(r"^/[A-Za-z0-9._/+@-]+$")
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
CUDA_ARCH = re.compile(r"^\d{2,3}[af]?(-real|-virtual)?$")
REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9._-]+$")
IMAGE_REF = re.compile(r"^[a-z0-9][a-z0-9._/:-]*(@sha256:[0-9a-f]{64})?$")
VLLM_VERSION = re.compile(r"^v?\d+\.\d+\.\d+([.+-][A-Za-z0-9.]+)?$")
ADDRESS = re.compile(r"^([0-9.]+|[0-9A-Fa-f:]+|localhost)$")
SHM_SIZE = re.compile(r"^\d+[bkmgBKMG]?$")
KV_DTYPE = re.compile(r"^[a-z0-9_-]+$")
GPU_SELECTION = ("index", "cdi")
TOOLKIT_MODES = ("docker", "cdi")
RESERVED_ENV = ("HF_TOKEN", "VLLM_API_KEY")


class StackError(ValueError):
    """A value in a host's stack is wrong; ``field`` names it."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


@dataclass(frozen=True)
class Source:
    """Where llama.cpp's source comes from: a pinned git ref, or a tarball for offline hosts."""

    git_url: str
    ref: str
    tarball: str = ""
    tarball_subdir: str = ""

    @property
    def kind(self) -> str:
        return "tarball" if self.tarball else "git"


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

    @property
    def unit(self) -> str:
        return f"gpuprov-llama-{self.name}.service"


@dataclass(frozen=True)
class Canary:
    enabled: bool = True
    interval: int = 30
    timeout: int = 20
    failures: int = 2


@dataclass(frozen=True)
class Replica:
    """One vLLM replica: one container, one systemd unit."""

    name: str
    model: str
    port: int
    gpus: tuple[int, ...]
    host: str = "127.0.0.1"
    served_model_name: str = ""
    gpu_memory_utilization: float = 0.9
    tensor_parallel_size: int = 1
    expert_parallel: bool = False
    max_model_len: int = 0
    max_num_seqs: int = 0
    max_num_batched_tokens: int = 0
    kv_cache_dtype: str = "auto"
    enforce_eager: bool = False
    enable_prefix_caching: bool = False
    speculative_config: str = ""  # JSON, as passed to --speculative-config
    shm_size: str = "16g"
    hf_token_env: str = ""
    api_key_env: str = ""
    env: tuple[tuple[str, str], ...] = ()
    extra_args: tuple[str, ...] = ()

    @property
    def unit(self) -> str:
        return f"gpuprov-vllm-{self.name}.service"

    @property
    def container(self) -> str:
        return f"gpuprov-vllm-{self.name}"

    @property
    def served(self) -> str:
        return self.served_model_name or self.model

    @property
    def local_model(self) -> bool:
        return self.model.startswith("/")


@dataclass(frozen=True)
class Vllm:
    """The vLLM replicas of a host and the image they run."""

    version: str = "v0.21.0"
    repository: str = "vllm/vllm-openai"
    image: str = ""
    engine: str = "/usr/bin/docker"
    gpu_selection: str = "index"
    model_cache: str = "/var/cache/gpuprov/huggingface"
    config_dir: str = "/etc/gpuprov/vllm"
    replicas: tuple[Replica, ...] = ()


@dataclass(frozen=True)
class Balancer:
    enabled: bool = False
    listen: int = 8400
    bind: str = "127.0.0.1"


@dataclass(frozen=True)
class Toolkit:
    install: bool = True
    mode: str = "docker"


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
    vllm: Vllm = field(default_factory=Vllm)
    balancer: Balancer = field(default_factory=Balancer)
    toolkit: Toolkit = field(default_factory=Toolkit)

    @property
    def builds_llama(self) -> bool:
        """llama.cpp is built where it serves something (or where no vLLM replica is planned)."""
        return bool(self.profiles) or not self.vllm.replicas


def role_path(role: str, *parts: str) -> Path:
    """A file or folder of a role, from the packaged roles (roles/ in the repository)."""
    return packaged.path("provision.roles", role, *parts)


@functools.cache
def defaults() -> Mapping[str, Any]:
    """The roles' defaults/main.yml merged, in role order."""
    merged: dict[str, Any] = {}
    for role in ROLE_NAMES:
        path = role_path(role, "defaults", "main.yml")
        merged.update(yaml.safe_load(path.read_text()) or {})
    return merged


def variables(data: Mapping[str, Any]) -> dict[str, Any]:
    """Defaults overlaid with the host's data (only the names the roles define)."""
    base = dict(defaults())
    base.update({k: v for k, v in data.items() if k in base})
    return base


def from_data(data: Mapping[str, Any]) -> Stack:
    """Validate a host's data into a Stack; raise StackError naming the bad field."""
    v = variables(data)
    source = Source(
        git_url=_text(v, "llama_cpp_git_url"),
        ref=_text(v, "llama_cpp_ref"),
        tarball=_text(v, "llama_cpp_tarball", empty=True),
        tarball_subdir=_text(v, "llama_cpp_tarball_subdir", empty=True),
    )
    for key in ("llama_cpp_git_url", "llama_cpp_ref"):
        if str(v.get(key) or "").startswith("-"):
            raise StackError(key, "must not start with '-'")
    for key in PATH_SETTINGS:
        _absolute(v, key)
    if source.tarball and not Path(source.tarball).is_file():
        raise StackError("llama_cpp_tarball", f"no such file on this machine: {source.tarball}")
    if not source.tarball and not re.match(r"^[A-Za-z0-9._/-]+$", source.ref):
        raise StackError("llama_cpp_ref", f"not a git ref: {source.ref!r}")
    archs = str(v.get("llama_cpp_cuda_architectures") or "")
    if archs and not all(CUDA_ARCH.match(a) for a in archs.split(";")):
        raise StackError("llama_cpp_cuda_architectures", f"expected e.g. '86;120a', got {archs!r}")
    profiles = _profiles(v.get("llama_server_profiles"), v.get("llama_server_defaults") or {})
    stack = Stack(
        source=source,
        prefix=_safe_path(v, "llama_cpp_prefix"),
        cuda_architectures=archs,
        cuda_compiler=_absolute(v, "llama_cpp_cuda_compiler")
        if v.get("llama_cpp_cuda_compiler")
        else "",
        cmake_args=_strings(v, "llama_cpp_cmake_args"),
        build_jobs=_int(v, "llama_cpp_build_jobs", 0, 1024),
        install_toolchain=_bool(v, "build_toolchain_install"),
        profiles=profiles,
        canary=Canary(
            enabled=_bool(v, "canary_enabled"),
            interval=_int(v, "canary_interval", 5, 86400),
            timeout=_int(v, "canary_timeout", 1, 600),
            failures=_int(v, "canary_failures", 1, 100),
        ),
        server_user=_name(v, "llama_server_user"),
        vllm=_vllm(v),
        balancer=_balancer(v),
        toolkit=Toolkit(
            install=_bool(v, "nvidia_container_toolkit_install"),
            mode=_choice(v, "nvidia_container_toolkit_mode", TOOLKIT_MODES),
        ),
    )
    _unique_ports(stack)
    return stack


def _vllm(v: Mapping[str, Any]) -> Vllm:
    version = _text(v, "vllm_version")
    if not VLLM_VERSION.match(version):
        raise StackError("vllm_version", f"a release like v0.21.0, got {version!r}")
    image = _text(v, "vllm_image", empty=True)
    repository = _text(v, "vllm_image_repository")
    for key, value in (("vllm_image", image), ("vllm_image_repository", repository)):
        if value and not IMAGE_REF.match(value):
            raise StackError(key, f"not an image reference: {value!r}")
    return Vllm(
        version=version,
        repository=repository,
        image=image,
        engine=_safe_path(v, "vllm_engine"),
        gpu_selection=_choice(v, "vllm_gpu_selection", GPU_SELECTION),
        model_cache=_absolute(v, "vllm_model_cache"),
        config_dir=_absolute(v, "vllm_config_dir"),
        replicas=_replicas(v.get("vllm_replicas"), v.get("vllm_defaults") or {}),
    )


def _replicas(raw: Any, base: Any) -> tuple[Replica, ...]:
    if not isinstance(raw, list):
        raise StackError("vllm_replicas", "must be a list of replicas")
    if not isinstance(base, Mapping):
        raise StackError("vllm_defaults", "must be a mapping")
    base = {**defaults()["vllm_defaults"], **base}  # a partial override keeps the other keys
    replicas = []
    for i, item in enumerate(raw):
        where = f"vllm_replicas[{i}]"
        if not isinstance(item, Mapping):
            raise StackError(where, "must be a mapping")
        replicas.append(replica(where, {**base, **item}))
    seen: set[str] = set()
    for i, r in enumerate(replicas):
        if r.name in seen:
            raise StackError(f"vllm_replicas[{i}].name", f"duplicate {r.name!r}")
        seen.add(r.name)
    return tuple(replicas)


def replica(where: str, v: Mapping[str, Any]) -> Replica:
    """One replica from its settings (the replica's entry over vllm_defaults)."""
    known = set(Replica.__dataclass_fields__)
    unknown = sorted(set(v) - known)
    if unknown:
        raise StackError(
            f"{where}.{unknown[0]}", f"unknown setting (known: {', '.join(sorted(known))})"
        )
    model = _text(v, "model", where)
    if model.startswith("/"):
        _absolute(v, "model", where)
    elif not REPO_ID.match(model):
        raise StackError(f"{where}.model", f"a Hugging Face repo id or an absolute path: {model!r}")
    gpus = v.get("gpus")
    if (
        not isinstance(gpus, list)
        or not gpus
        or not all(isinstance(g, int) and not isinstance(g, bool) and 0 <= g < 64 for g in gpus)
        or len(set(gpus)) != len(gpus)
    ):
        raise StackError(f"{where}.gpus", f"a list of distinct GPU indexes, got {gpus!r}")
    tp = _int(v, "tensor_parallel_size", 0, 64, where)
    if tp and tp != len(gpus):
        raise StackError(
            f"{where}.tensor_parallel_size", f"{tp} needs {tp} GPUs; gpus lists {len(gpus)}"
        )
    host = _text(v, "host", where)
    if not ADDRESS.match(host):
        raise StackError(f"{where}.host", f"an IP address, got {host!r}")
    utilization = v.get("gpu_memory_utilization")
    if isinstance(utilization, bool) or not isinstance(utilization, (int, float)):
        raise StackError(f"{where}.gpu_memory_utilization", "a fraction like 0.9")
    if not 0 < utilization <= 1:
        raise StackError(f"{where}.gpu_memory_utilization", f"between 0 and 1, got {utilization}")
    dtype = _text(v, "kv_cache_dtype", where)
    if not KV_DTYPE.match(dtype):
        raise StackError(f"{where}.kv_cache_dtype", f"not a cache dtype: {dtype!r}")
    shm = str(v.get("shm_size", ""))
    if not SHM_SIZE.match(shm):
        raise StackError(f"{where}.shm_size", f"a size like 16g, got {shm!r}")
    spec = v.get("speculative_config") or {}
    if not isinstance(spec, Mapping):
        raise StackError(f"{where}.speculative_config", "a mapping, e.g. {method: mtp, ...}")
    served = _text(v, "served_model_name", where, empty=True)
    return Replica(
        name=_name(v, "name", where),
        model=model,
        port=_int(v, "port", 1, 65535, where),
        gpus=tuple(gpus),
        host=host,
        served_model_name=served,
        gpu_memory_utilization=float(utilization),
        tensor_parallel_size=tp or len(gpus),
        expert_parallel=_bool(v, "expert_parallel", where),
        max_model_len=_int(v, "max_model_len", 0, 100_000_000, where),
        max_num_seqs=_int(v, "max_num_seqs", 0, 1_000_000, where),
        max_num_batched_tokens=_int(v, "max_num_batched_tokens", 0, 100_000_000, where),
        kv_cache_dtype=dtype,
        enforce_eager=_bool(v, "enforce_eager", where),
        enable_prefix_caching=_bool(v, "enable_prefix_caching", where),
        speculative_config=json.dumps(dict(spec), sort_keys=True, separators=(",", ":"))
        if spec
        else "",
        shm_size=shm,
        hf_token_env=_env_name(v, "hf_token_env", where),
        api_key_env=_env_name(v, "api_key_env", where),
        env=_env(v, where),
        extra_args=_strings(v, "extra_args", where),
    )


def _env_name(v: Mapping[str, Any], key: str, where: str) -> str:
    value = _text(v, key, where, empty=True)
    if value and not ENV_NAME.match(value):
        raise StackError(f"{where}.{key}", "the name of an environment variable")
    return value


def _env(v: Mapping[str, Any], where: str) -> tuple[tuple[str, str], ...]:
    raw = v.get("env") or {}
    if not isinstance(raw, Mapping):
        raise StackError(f"{where}.env", "a mapping of environment variables")
    out = []
    for name, value in sorted(raw.items()):
        if not isinstance(name, str) or not ENV_NAME.match(name):
            raise StackError(f"{where}.env", f"not an environment variable name: {name!r}")
        if name in RESERVED_ENV:
            raise StackError(
                f"{where}.env.{name}", "secrets come from hf_token_env / api_key_env only"
            )
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise StackError(f"{where}.env.{name}", "a string or a number")
        text = str(value)
        if any(ord(c) < 32 for c in text):
            raise StackError(f"{where}.env.{name}", "must not contain control characters")
        out.append((name, text))
    return tuple(out)


def _balancer(v: Mapping[str, Any]) -> Balancer:
    bind = _text(v, "nginx_lb_bind")
    if not ADDRESS.match(bind):
        raise StackError("nginx_lb_bind", f"an IP address, got {bind!r}")
    return Balancer(
        enabled=_bool(v, "nginx_lb_enabled"),
        listen=_int(v, "nginx_lb_listen", 1, 65535),
        bind=bind,
    )


def _unique_ports(stack: Stack) -> None:
    """Every server of the host listens on its own port."""
    used: dict[int, str] = {}
    claims = [(p.port, f"llama_server_profiles ({p.name})") for p in stack.profiles]
    claims += [(r.port, f"vllm_replicas ({r.name})") for r in stack.vllm.replicas]
    if stack.balancer.enabled:
        claims.append((stack.balancer.listen, "nginx_lb_listen"))
    for port, owner in claims:
        if port in used:
            raise StackError(owner, f"port {port} is already used by {used[port]}")
        used[port] = owner


def _choice(v: Mapping[str, Any], key: str, choices: tuple[str, ...]) -> str:
    value = v.get(key)
    if value not in choices:
        raise StackError(key, f"one of {', '.join(choices)}, got {value!r}")
    return str(value)


def _profiles(raw: Any, base: Any) -> tuple[Profile, ...]:
    if not isinstance(raw, list):
        raise StackError("llama_server_profiles", "must be a list of profiles")
    if not isinstance(base, Mapping):
        raise StackError("llama_server_defaults", "must be a mapping")
    profiles: list[Profile] = []
    for i, item in enumerate(raw):
        where = f"llama_server_profiles[{i}]"
        if not isinstance(item, Mapping):
            raise StackError(where, "must be a mapping")
        merged = {**base, **item}
        profiles.append(_profile(where, merged))
    for attr in ("name", "port"):
        seen: set[object] = set()
        for i, p in enumerate(profiles):
            value = getattr(p, attr)
            if value in seen:
                raise StackError(f"llama_server_profiles[{i}].{attr}", f"duplicate {value!r}")
            seen.add(value)
    return tuple(profiles)


def _profile(where: str, v: Mapping[str, Any]) -> Profile:
    known = set(Profile.__dataclass_fields__)
    unknown = sorted(set(v) - known)
    if unknown:
        raise StackError(
            f"{where}.{unknown[0]}", f"unknown setting (known: {', '.join(sorted(known))})"
        )
    name = _name(v, "name", where)
    raw_layers = v.get("gpu_layers", "")
    if isinstance(raw_layers, bool):
        raise StackError(f"{where}.gpu_layers", "a number, 'auto' or 'all', got a boolean")
    gpu_layers = "" if raw_layers in (None, "") else str(raw_layers)
    if gpu_layers and not (gpu_layers.isdigit() or gpu_layers in ("auto", "all")):
        raise StackError(f"{where}.gpu_layers", f"a number, 'auto' or 'all', got {gpu_layers!r}")
    flash = str(v.get("flash_attn", "auto"))
    if flash not in FLASH_ATTN:
        raise StackError(f"{where}.flash_attn", f"one of {', '.join(FLASH_ATTN)}, got {flash!r}")
    caches = {}
    for key in ("cache_type_k", "cache_type_v"):
        caches[key] = str(v.get(key, "f16"))
        if caches[key] not in CACHE_TYPES:
            raise StackError(f"{where}.{key}", f"one of {', '.join(CACHE_TYPES)}")
    api_key_env = _text(v, "api_key_env", where, empty=True)
    if api_key_env and not ENV_NAME.match(api_key_env):
        raise StackError(f"{where}.api_key_env", "the name of an environment variable")
    return Profile(
        name=name,
        model=_absolute(v, "model", where),
        alias=_text(v, "alias", where) if "alias" in v else name,
        port=_int(v, "port", 1, 65535, where),
        host=_text(v, "host", where) if "host" in v else "127.0.0.1",
        ctx_size=_int(v, "ctx_size", 0, 10_000_000, where) if "ctx_size" in v else 4096,
        parallel=_int(v, "parallel", 1, 1024, where) if "parallel" in v else 1,
        gpu_layers=gpu_layers,
        flash_attn=flash,
        cache_type_k=caches["cache_type_k"],
        cache_type_v=caches["cache_type_v"],
        mlock=_bool(v, "mlock", where) if "mlock" in v else False,
        threads=_int(v, "threads", 0, 4096, where) if "threads" in v else 0,
        api_key_env=api_key_env,
        extra_args=_strings(v, "extra_args", where) if "extra_args" in v else (),
    )


def _key(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _text(v: Mapping[str, Any], key: str, where: str = "", empty: bool = False) -> str:
    value = v.get(key, "")
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise StackError(_key(where, key), f"must be a string, got {type(value).__name__}")
    if not value and not empty:
        raise StackError(_key(where, key), "must not be empty")
    if any(ord(c) < 32 for c in value):
        raise StackError(_key(where, key), "must not contain control characters")
    return value


def _name(v: Mapping[str, Any], key: str, where: str = "") -> str:
    value = _text(v, key, where)
    if not NAME.match(value):
        raise StackError(_key(where, key), f"lower-case letters, digits and '-', got {value!r}")
    return value


def _absolute(v: Mapping[str, Any], key: str, where: str = "") -> str:
    value = _text(v, key, where)
    if not value.startswith("/") or "/../" in f"{value}/":
        raise StackError(_key(where, key), f"must be an absolute path, got {value!r}")
    return value


def _safe_path(v: Mapping[str, Any], key: str) -> str:
    """An absolute path safe in an ExecStart binary name (systemd unescapes nothing there)."""
    value = _absolute(v, key)
    if not SAFE_PATH.match(value):
        raise StackError(key, f"letters, digits and ._/+@- only, got {value!r}")
    return value


def _int(v: Mapping[str, Any], key: str, low: int, high: int, where: str = "") -> int:
    value = v.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise StackError(_key(where, key), f"must be an integer {low}-{high}, got {value!r}")
    return value


def _bool(v: Mapping[str, Any], key: str, where: str = "") -> bool:
    value = v.get(key)
    if not isinstance(value, bool):
        raise StackError(_key(where, key), f"must be true or false, got {value!r}")
    return value


def _strings(v: Mapping[str, Any], key: str, where: str = "") -> tuple[str, ...]:
    value = v.get(key) or []
    if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
        raise StackError(_key(where, key), "must be a list of strings")
    if any(any(ord(c) < 32 for c in s) for s in value):
        raise StackError(_key(where, key), "must not contain control characters")
    return tuple(value)
