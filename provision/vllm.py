"""How a vLLM replica runs: the container engine's command line and the `vllm serve` arguments.

One source for both engines: pyinfra calls these functions, Ansible reaches them through the vllm
role's filter plugin. Secrets never appear here: the unit passes them by name (`-e HF_TOKEN`) from
its 0600 EnvironmentFile.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from provision.stack import Replica, Vllm, replica

CONTAINER_PORT = 8000
HF_CACHE = "/root/.cache/huggingface"


def serve_args(r: Replica) -> list[str]:
    """The arguments after the image: what `vllm serve` is asked to do."""
    args = [
        "--model",
        r.model,
        "--served-model-name",
        r.served,
        "--host",
        "0.0.0.0",
        "--port",
        str(CONTAINER_PORT),
        "--gpu-memory-utilization",
        f"{r.gpu_memory_utilization:g}",
        "--tensor-parallel-size",
        str(r.tensor_parallel_size),
    ]
    if r.expert_parallel:
        args.append("--enable-expert-parallel")
    for flag, value in (
        ("--max-model-len", r.max_model_len),
        ("--max-num-seqs", r.max_num_seqs),
        ("--max-num-batched-tokens", r.max_num_batched_tokens),
    ):
        if value:
            args += [flag, str(value)]
    if r.kv_cache_dtype != "auto":
        args += ["--kv-cache-dtype", r.kv_cache_dtype]
    if r.enforce_eager:
        args.append("--enforce-eager")
    if r.enable_prefix_caching:
        args.append("--enable-prefix-caching")
    if r.speculative_config:
        args += ["--speculative-config", r.speculative_config]
    return args + list(r.extra_args)


def env_names(r: Replica) -> list[str]:
    """Variables the container gets from the unit's EnvironmentFile, by name only."""
    names = [name for name, _ in r.env]
    if r.hf_token_env:
        names.append("HF_TOKEN")
    if r.api_key_env:
        names.append("VLLM_API_KEY")
    return names


def gpu_args(r: Replica, selection: str) -> list[str]:
    if selection == "cdi":
        return [a for g in r.gpus for a in ("--device", f"nvidia.com/gpu={g}")]
    return ["--gpus", '"device=' + ",".join(str(g) for g in r.gpus) + '"']


def run_args(r: Replica, settings: Vllm, image: str) -> list[str]:
    """The whole foreground `docker run` of one replica (the unit's ExecStart). An on-demand
    replica is published on its loopback backend port: its socket owns the public one."""
    host, port = ("127.0.0.1", r.backend_port) if r.on_demand else (r.host, r.port)
    args = [
        settings.engine,
        "run",
        "--rm",
        "--name",
        r.container,
        "--pull",
        "never",
        *gpu_args(r, settings.gpu_selection),
        "--ipc",
        "host",
        "--shm-size",
        r.shm_size,
        "-p",
        f"{_publish_host(host)}:{port}:{CONTAINER_PORT}",
        "-v",
        f"{settings.model_cache}:{HF_CACHE}",
    ]
    if r.local_model:
        args += ["-v", f"{r.model}:{r.model}:ro"]
    for name in env_names(r):
        args += ["-e", name]
    return [*args, image, *serve_args(r)]


def _publish_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def coerce(value: Replica | Mapping[str, Any]) -> Replica:
    """A Replica from a validated one, its dataclasses.asdict() form, or Ansible's merged dict."""
    if isinstance(value, Replica):
        return value
    data = dict(value)
    for key in ("gpus", "extra_args"):
        if key in data:
            data[key] = list(data[key])
    if isinstance(data.get("env"), (list, tuple)):
        data["env"] = dict(data["env"])
    spec = data.get("speculative_config")
    if isinstance(spec, str):
        data["speculative_config"] = json.loads(spec) if spec else {}
    return replica("replica", data)


def command_filter(
    value: Replica | Mapping[str, Any],
    image: str,
    engine: str,
    gpu_selection: str,
    model_cache: str,
) -> list[str]:
    """Jinja filter: `replica | vllm_command(image, vllm_engine, ...)`."""
    settings = Vllm(engine=engine, gpu_selection=gpu_selection, model_cache=model_cache)
    return run_args(coerce(value), settings, image)


def env_filter(value: Replica | Mapping[str, Any]) -> list[list[str]]:
    """Jinja filter: the replica's non-secret environment as [name, value] pairs."""
    return [[name, text] for name, text in coerce(value).env]


FILTERS = {"vllm_command": command_filter, "vllm_env": env_filter}
