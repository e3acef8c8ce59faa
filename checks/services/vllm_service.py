"""A `vllm serve` as facts: its arguments parsed the way vLLM's argument parser reads them.

vLLM accepts `--flag value` and `--flag=value`, underscores for dashes in flag names
(`--max_num_seqs`), switches with a `--no-` negation, short aliases (`-tp`, `-ep`), JSON
arguments (`--speculative-config '{"method": "mtp"}'`) and their dotted form
(`--speculative-config.method mtp`), which replaces the whole JSON argument. As with argparse,
the last occurrence of a flag wins. A value flag the arguments do not set stays None (the
release's default); a switch they do not give is False, unless `--config` names a YAML file
that may set it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from checks import inputs
from checks.facts.model import VllmService
from checks.services.modelconfig import ModelConfig

SHORT_FLAGS = {
    "-tp": "--tensor-parallel-size",
    "-ep": "--enable-expert-parallel",
    "-q": "--quantization",
}
SWITCHES = frozenset({"--enforce-eager", "--enable-expert-parallel"})
# Flags that take exactly one value; any other flag takes the next token when it is not a flag.
VALUE_FLAGS = frozenset(
    {
        "--model",
        "--kv-cache-dtype",
        "--max-num-seqs",
        "--gpu-memory-utilization",
        "--speculative-config",
        "--compilation-config",
        "--tensor-parallel-size",
        "--quantization",
        "--config",
    }
)
_NUMBER = re.compile(r"-\d+(?:\.\d+)?")


def service(
    name: str,
    image: str,
    version: str | None,
    argv: Sequence[str],
    config: ModelConfig | None,
    gpus: Sequence[int] | None = None,
    env: Mapping[str, str] | None = None,
) -> VllmService:
    """The replica `name` running `image` (vLLM `version`) with `argv` after the image, on
    `gpus` with the environment `env`."""
    args = list(argv)
    flags, positional = parse_args(args)
    from_yaml = "--config" in flags
    switch_default = None if from_yaml else False
    speculative = _json_object(flags.get("--speculative-config"))
    compilation = _json_object(flags.get("--compilation-config"))
    model = flags.get("--model") or (positional[0] if positional else None)
    return VllmService(
        name=name,
        image=image or None,
        version=version,
        argv=args,
        model=model if isinstance(model, str) else None,
        architectures=list(config.architectures) if config and config.architectures else None,
        layer_types=list(config.layer_types) if config and config.layer_types else None,
        hybrid=config.hybrid if config else None,
        moe=config.moe if config else None,
        model_guessed=bool(config and config.guessed),
        kv_cache_dtype=_text(flags.get("--kv-cache-dtype")),
        max_num_seqs=_int(flags.get("--max-num-seqs")),
        gpu_memory_utilization=_float(flags.get("--gpu-memory-utilization")),
        enforce_eager=_switch(flags, "--enforce-eager", switch_default),
        cudagraph_mode=_text(compilation.get("cudagraph_mode")) if compilation else None,
        speculative_method=_text(speculative.get("method")) if speculative else None,
        tensor_parallel_size=_int(flags.get("--tensor-parallel-size")),
        gpus=list(gpus) if gpus is not None else None,
        env=_tuning(env) if env is not None else None,
        expert_parallel=_switch(flags, "--enable-expert-parallel", switch_default),
    )


# Environment variables kept in the facts: engine tuning knobs. Others may hold a secret (a token
# for some service) and reach the facts' JSON, so they are left out.
TUNING_ENV = ("NCCL_", "CUDA_", "VLLM_", "PYTORCH_", "TORCH_", "OMP_")


def _tuning(env: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(TUNING_ENV) and "KEY" not in k}


def parse_args(argv: Sequence[str]) -> tuple[dict[str, Any], list[str]]:
    """(flag -> last value, positional arguments). Switches map to True or False; dotted JSON
    keys are gathered into one dict per flag."""
    tokens = list(argv)
    if tokens[:2] == ["vllm", "serve"]:
        tokens = tokens[2:]
    elif tokens[:1] == ["serve"]:
        tokens = tokens[1:]
    flags: dict[str, Any] = {}
    dotted: dict[str, dict[str, Any]] = {}
    positional: list[str] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        i += 1
        if not token.startswith("-") or _NUMBER.fullmatch(token) or token == "-":
            positional.append(token)
            continue
        name, has_value, value = token.partition("=")
        name = _canonical(name)
        if name.startswith("--no-") and name[5:] and f"--{name[5:]}" in SWITCHES:
            flags[f"--{name[5:]}"] = False
            continue
        if name in SWITCHES:
            flags[name] = True
            continue
        if not has_value and i < len(tokens) and _is_value(tokens[i], name):
            value, has_value = tokens[i], "="
            i += 1
        if "." in name:
            flag, _, path = name.partition(".")
            _set_path(dotted.setdefault(flag, {}), path, value)
        elif has_value:
            flags[name] = value
    # vLLM appends each dotted dict as one JSON argument after all others: it replaces the flag.
    for flag, tree in dotted.items():
        flags[flag] = json.dumps(tree)
    return flags, positional


def _canonical(name: str) -> str:
    """`--max_num_seqs` -> `--max-num-seqs` (only before the first dot), short aliases expanded."""
    if name in SHORT_FLAGS:
        return SHORT_FLAGS[name]
    if not name.startswith("--"):
        return name
    head, dot, tail = name[2:].partition(".")
    return "--" + head.replace("_", "-") + dot + tail


def _is_value(token: str, flag: str) -> bool:
    if flag in VALUE_FLAGS:
        return True
    return not token.startswith("-") or bool(_NUMBER.fullmatch(token))


def _set_path(tree: dict[str, Any], path: str, value: str) -> None:
    keys = [k for k in path.rstrip("+").split(".") if k]
    if not keys:
        return
    for key in keys[:-1]:
        child = tree.get(key)
        if not isinstance(child, dict):
            child = tree[key] = {}
        tree = child
    try:
        tree[keys[-1]] = inputs.loads(value)
    except ValueError:  # inputs.InputError (too deeply nested) is one too
        tree[keys[-1]] = value


def _switch(flags: dict[str, Any], name: str, default: bool | None) -> bool | None:
    value = flags.get(name)
    return value if isinstance(value, bool) else default


def _json_object(value: Any) -> dict[str, Any] | None:
    if not isinstance(value, str):
        return None
    try:
        data = json.loads(value)
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def _text(value: Any) -> str | None:
    return value.strip() or None if isinstance(value, str) else None


def _int(value: Any) -> int | None:
    try:
        return int(str(value).strip()) if value is not None else None
    except ValueError:
        return None


def _float(value: Any) -> float | None:
    try:
        return float(str(value).strip()) if value is not None else None
    except ValueError:
        return None
