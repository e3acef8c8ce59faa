"""The vllm role's settings: the image and the replicas, one container and unit each."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from provision import role_table
from provision.settings import read, residency
from provision.settings.read import StackError

REPO_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9._-]+")
IMAGE_REF = re.compile(r"[a-z0-9][a-z0-9._/:-]*(@sha256:[0-9a-f]{64})?")
VLLM_VERSION = re.compile(r"v?[0-9]+\.[0-9]+\.[0-9]+([.+-][A-Za-z0-9.]+)?")
SHM_SIZE = re.compile(r"[0-9]+[bkmgBKMG]?")
KV_DTYPE = re.compile(r"[a-z0-9_-]+")
GPU_SELECTION = ("index", "cdi")
RESERVED_ENV = ("HF_TOKEN", "VLLM_API_KEY")


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
    # resident: always running. on_demand: systemd owns `port` (a .socket unit) and starts the
    # replica on the first connection; it stops after idle_seconds without one. A swap_group's
    # members are on demand, and at most one of them runs (provision/settings/residency.py).
    residency: str = "resident"
    idle_seconds: int = 600
    swap_group: str = ""
    backend_port: int = 0  # where an on-demand replica's container is published (loopback)

    @property
    def unit(self) -> str:
        return f"gpuprov-vllm-{self.name}.service"

    @property
    def on_demand(self) -> bool:
        return self.residency == "on_demand"

    @property
    def socket_unit(self) -> str:
        return f"gpuprov-vllm-{self.name}.socket"

    @property
    def proxy_unit(self) -> str:
        return f"gpuprov-vllm-{self.name}-proxy.service"

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
    startup: int = 900  # seconds a replica may take to answer after a start
    wait_ready: str = "/usr/local/lib/gpuprov/gpuprov-wait-ready.py"  # on-demand readiness wait
    replicas: tuple[Replica, ...] = ()


def parse(v: Mapping[str, Any]) -> Vllm:
    version = read.text(v, "vllm_version")
    if not VLLM_VERSION.fullmatch(version):
        raise StackError("vllm_version", f"a release like v0.21.0, got {version!r}")
    image = read.text(v, "vllm_image", empty=True)
    repository = read.text(v, "vllm_image_repository")
    for key, value in (("vllm_image", image), ("vllm_image_repository", repository)):
        if value and not IMAGE_REF.fullmatch(value):
            raise StackError(key, f"not an image reference: {value!r}")
    return Vllm(
        version=version,
        repository=repository,
        image=image,
        engine=read.safe_path(v, "vllm_engine"),
        gpu_selection=read.choice(v, "vllm_gpu_selection", GPU_SELECTION),
        model_cache=read.absolute(v, "vllm_model_cache"),
        config_dir=read.absolute(v, "vllm_config_dir"),
        startup=read.integer(v, "vllm_startup_seconds", 1, 86400),
        wait_ready=read.absolute(v, "vllm_wait_ready"),
        replicas=_replicas(v.get("vllm_replicas"), v.get("vllm_defaults") or {}),
    )


def _replicas(raw: Any, base: Any) -> tuple[Replica, ...]:
    if not isinstance(raw, list):
        raise StackError("vllm_replicas", "must be a list of replicas")
    if not isinstance(base, Mapping):
        raise StackError("vllm_defaults", "must be a mapping")
    # a partial override keeps the other keys
    base = {**role_table.defaults()["vllm_defaults"], **base}
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
    residency.check_ports(replicas, "vllm_replicas", "replica")
    return tuple(replicas)


def replica(where: str, v: Mapping[str, Any]) -> Replica:
    """One replica from its settings (the replica's entry over vllm_defaults)."""
    read.unknown(v, set(Replica.__dataclass_fields__), where)
    model = read.text(v, "model", where)
    if model.startswith("/"):
        read.absolute(v, "model", where)
    elif not REPO_ID.fullmatch(model):
        raise StackError(f"{where}.model", f"a Hugging Face repo id or an absolute path: {model!r}")
    gpus = v.get("gpus")
    if (
        not isinstance(gpus, list)
        or not gpus
        or not all(isinstance(g, int) and not isinstance(g, bool) and 0 <= g < 64 for g in gpus)
        or len(set(gpus)) != len(gpus)
    ):
        raise StackError(f"{where}.gpus", f"a list of distinct GPU indexes, got {gpus!r}")
    tp = read.integer(v, "tensor_parallel_size", 0, 64, where)
    if tp and tp != len(gpus):
        raise StackError(
            f"{where}.tensor_parallel_size", f"{tp} needs {tp} GPUs; gpus lists {len(gpus)}"
        )
    host = read.address(v, "host", where)
    utilization = v.get("gpu_memory_utilization")
    if isinstance(utilization, bool) or not isinstance(utilization, (int, float)):
        raise StackError(f"{where}.gpu_memory_utilization", "a fraction like 0.9")
    if not 0 < utilization <= 1:
        raise StackError(f"{where}.gpu_memory_utilization", f"between 0 and 1, got {utilization}")
    dtype = read.text(v, "kv_cache_dtype", where)
    if not KV_DTYPE.fullmatch(dtype):
        raise StackError(f"{where}.kv_cache_dtype", f"not a cache dtype: {dtype!r}")
    shm = str(v.get("shm_size", ""))
    if not SHM_SIZE.fullmatch(shm):
        raise StackError(f"{where}.shm_size", f"a size like 16g, got {shm!r}")
    spec = v.get("speculative_config") or {}
    if not isinstance(spec, Mapping):
        raise StackError(f"{where}.speculative_config", "a mapping, e.g. {method: mtp, ...}")
    served = read.text(v, "served_model_name", where, empty=True)
    port = read.integer(v, "port", 1, 65535, where)
    return Replica(
        name=read.name(v, "name", where),
        model=model,
        port=port,
        gpus=tuple(gpus),
        host=host,
        served_model_name=served,
        gpu_memory_utilization=float(utilization),
        tensor_parallel_size=tp or len(gpus),
        expert_parallel=read.boolean(v, "expert_parallel", where),
        max_model_len=read.integer(v, "max_model_len", 0, 100_000_000, where),
        max_num_seqs=read.integer(v, "max_num_seqs", 0, 1_000_000, where),
        max_num_batched_tokens=read.integer(v, "max_num_batched_tokens", 0, 100_000_000, where),
        kv_cache_dtype=dtype,
        enforce_eager=read.boolean(v, "enforce_eager", where),
        enable_prefix_caching=read.boolean(v, "enable_prefix_caching", where),
        speculative_config=_speculative(spec, where),
        shm_size=shm,
        hf_token_env=read.env_name(v, "hf_token_env", where),
        api_key_env=read.env_name(v, "api_key_env", where),
        env=_env(v, where),
        extra_args=read.strings(v, "extra_args", where),
        **residency.parse(v, where, port).fields(),
    )


def _speculative(spec: Mapping[str, Any], where: str) -> str:
    """--speculative-config's JSON ("" for none): plain JSON values only."""
    if not spec:
        return ""
    try:
        return json.dumps(dict(spec), sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise StackError(f"{where}.speculative_config", f"not plain JSON: {exc}") from None


def _env(v: Mapping[str, Any], where: str) -> tuple[tuple[str, str], ...]:
    raw = v.get("env") or {}
    if not isinstance(raw, Mapping):
        raise StackError(f"{where}.env", "a mapping of environment variables")
    out = []
    for name, value in sorted(raw.items()):
        if not isinstance(name, str) or not read.ENV_NAME.fullmatch(name):
            raise StackError(f"{where}.env", f"not an environment variable name: {name!r}")
        if name in RESERVED_ENV:
            raise StackError(
                f"{where}.env.{name}", "secrets come from hf_token_env / api_key_env only"
            )
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise StackError(f"{where}.env.{name}", "a string or a number")
        text = str(value)
        if read.unwritable(text):
            raise StackError(
                f"{where}.env.{name}", "must not contain control characters or line breaks"
            )
        out.append((name, text))
    return tuple(out)
