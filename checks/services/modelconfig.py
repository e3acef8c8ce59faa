"""What the vLLM rules need from a model's Hugging Face config.json: its architecture classes,
its layer kinds, and whether it is hybrid (attention plus Mamba or linear-attention layers) or a
mixture of experts (MoE).

Multimodal configs (Qwen3.5/3.6) keep the language model under `text_config`; both levels are
read. Odd input gives None or unknown (None) fields, never an exception. `guess_from_name` reads
the same two facts from a Hugging Face repo id when no config.json is at hand: a guess, marked so.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, TypeGuard

# Architecture classes that interleave attention with Mamba or linear-attention layers
# (known-bad matrix, VLLM-TQ-HYBRID).
HYBRID_ARCHITECTURES = frozenset(
    {
        "Qwen3NextForCausalLM",
        "JambaForCausalLM",
        "FalconH1ForCausalLM",
        "GraniteMoeHybridForCausalLM",
        "Qwen3_5ForCausalLM",
        "Qwen3_5ForConditionalGeneration",
        "Qwen3_5MoeForCausalLM",
        "Qwen3_5MoeForConditionalGeneration",
        "NemotronHForCausalLM",
    }
)
HYBRID_MODEL_TYPES = frozenset(
    {
        "qwen3_next",
        "jamba",
        "falcon_h1",
        "granitemoehybrid",
        "qwen3_5",
        "qwen3_5_text",
        "qwen3_5_moe",
        "qwen3_5_moe_text",
        "nemotron_h",
    }
)
# Layer kinds that are not attention: Granite and Falcon-H1 say "mamba", Qwen3.5/3.6 and
# Qwen3-Next say "linear_attention".
HYBRID_LAYER_MARKERS = ("mamba", "linear_attention")
EXPERT_COUNT_KEYS = ("num_experts", "num_local_experts", "n_routed_experts")

# Name patterns for guess_from_name. Families whose every release is hybrid:
_HYBRID_NAMES = re.compile(
    r"qwen3\.[56]\b|qwen3(?:-coder)?-next|jamba|falcon-h1|granite-4\.0-h-|nemotron-h\b"
    r"|nemotron-nano-\d+b-v2",
    re.IGNORECASE,
)
# "-A3B", "-A22B", "-A3.5B" (active parameters, Qwen and others), "8x7B" (Mixtral), "-16E".
_MOE_NAMES = re.compile(r"-a\d+(?:\.\d+)?b\b|\b\d+x\d+(?:\.\d+)?b\b|-\d+e\b|\bmoe\b", re.IGNORECASE)
# Qwen3 family names carry "-A<n>B" on every MoE release but Next (Qwen3-Coder-Next is 80B-A3B),
# so elsewhere its absence means dense; plain Qwen3 (not 3.5/3.6, not Next) is attention only.
_QWEN3_NAMES = re.compile(r"qwen3(?:\.\d+)?-", re.IGNORECASE)
_QWEN3_ATTENTION_ONLY = re.compile(r"qwen3-(?!.*next)", re.IGNORECASE)


@dataclass(frozen=True)
class ModelConfig:
    """A model's architecture facts; None where the config does not say.

    `guessed` is True when they come from the model's name, not its config.json.
    """

    architectures: tuple[str, ...] | None = None
    layer_types: tuple[str, ...] | None = None
    hybrid: bool | None = None
    moe: bool | None = None
    guessed: bool = False


def parse(text: str) -> ModelConfig | None:
    """The facts of a config.json's text; None when it is not a JSON object."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    return from_mapping(data)


def from_mapping(data: dict[str, Any]) -> ModelConfig:
    """The facts of an already decoded config.json."""
    levels = [d for d in (_dict(data.get("text_config")), data) if d is not None]
    architectures = _strings(data.get("architectures"))
    layer_types = next((t for t in (_strings(d.get("layer_types")) for d in levels) if t), None)
    model_types = {t for t in (d.get("model_type") for d in levels) if isinstance(t, str)}
    known = bool(architectures or layer_types or model_types)
    return ModelConfig(
        architectures=architectures,
        layer_types=layer_types,
        hybrid=_hybrid(levels, architectures, layer_types, model_types) if known else None,
        moe=_moe(levels, architectures) if known else None,
    )


def guess_from_name(model: str) -> ModelConfig | None:
    """A guess at hybrid/moe from a Hugging Face repo id ("Qwen/Qwen3.6-35B-A3B"), or None.

    Only names of families whose releases all share the trait are read as hybrid; "-A3B"-style
    active-parameter suffixes, "8x7B" and "-16E" are read as MoE. Quantised re-uploads keep the
    base name ("cyankiwi/Qwen3.6-27B-AWQ-INT4"), so they are guessed alike.
    """
    name = model.rstrip("/").rsplit("/", 1)[-1]
    if not name:
        return None
    hybrid: bool | None = None
    if _HYBRID_NAMES.search(name):
        hybrid = True
    elif _QWEN3_ATTENTION_ONLY.search(name):
        hybrid = False
    moe: bool | None = None
    if _MOE_NAMES.search(name):
        moe = True
    elif _QWEN3_NAMES.search(name) and "next" not in name.lower():
        moe = False
    if hybrid is None and moe is None:
        return None
    return ModelConfig(hybrid=hybrid, moe=moe, guessed=True)


def _hybrid(
    levels: list[dict[str, Any]],
    architectures: tuple[str, ...] | None,
    layer_types: tuple[str, ...] | None,
    model_types: set[str],
) -> bool:
    if layer_types and any(m in t.lower() for t in layer_types for m in HYBRID_LAYER_MARKERS):
        return True
    if architectures and HYBRID_ARCHITECTURES.intersection(architectures):
        return True
    if HYBRID_MODEL_TYPES.intersection(model_types):
        return True
    # Nemotron-H style: one letter per layer, "M" for Mamba and "*" for attention.
    return any(
        isinstance(p, str) and "M" in p for p in (d.get("hybrid_override_pattern") for d in levels)
    )


def _moe(levels: list[dict[str, Any]], architectures: tuple[str, ...] | None) -> bool:
    counts: list[int] = [
        c for d in levels for c in (d.get(k) for k in EXPERT_COUNT_KEYS) if _is_int(c)
    ]
    if counts:
        # One expert is a plain MLP (Jamba and Granite use 1 or 0 for their dense variants).
        return max(counts) > 1
    return any(re.search(r"Mo[Ee]", a) for a in architectures or ())


def _dict(value: Any) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None


def _strings(value: Any) -> tuple[str, ...] | None:
    if not isinstance(value, list):
        return None
    found = tuple(v for v in value if isinstance(v, str))
    return found or None


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)
