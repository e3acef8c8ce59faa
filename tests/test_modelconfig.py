"""Model facts from real Hugging Face config.json files, and the name guess for repo ids.

The configs under tests/fixtures/modelconfig/ are published ones (SOURCES.tsv names each URL).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from checks.services import modelconfig
from checks.services.modelconfig import ModelConfig
from tests.conftest import FIXTURES

CONFIGS = FIXTURES / "modelconfig"


def _config(name: str) -> ModelConfig:
    config = modelconfig.parse((CONFIGS / name).read_text())
    assert config is not None
    return config


# file -> (architectures, hybrid, moe)
REAL: dict[str, tuple[tuple[str, ...], bool, bool]] = {
    "llama-3.1-8b.json": (("LlamaForCausalLM",), False, False),
    "qwen3-30b-a3b.json": (("Qwen3MoeForCausalLM",), False, True),
    "qwen3.6-35b-a3b.json": (("Qwen3_5MoeForConditionalGeneration",), True, True),
    "ai21-jamba-1.5-mini.json": (("JambaForCausalLM",), True, True),
}


@pytest.mark.parametrize("name", sorted(REAL))
def test_real_config(name: str) -> None:
    architectures, hybrid, moe = REAL[name]
    config = _config(name)
    assert config.architectures == architectures
    assert (config.hybrid, config.moe, config.guessed) == (hybrid, moe, False)


def test_every_recorded_config_is_tested_and_sourced() -> None:
    with (CONFIGS / "SOURCES.tsv").open(newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    files = {p.name for p in CONFIGS.glob("*.json")}
    assert {r["file"] for r in rows} == files == set(REAL)
    for row in rows:
        assert row["url"].startswith("https://huggingface.co/"), row
        assert row["read_from"], row


def test_qwen36_layer_types_come_from_text_config() -> None:
    """Qwen3.5/3.6 nest the language model: 3 linear-attention layers to 1 full attention."""
    config = _config("qwen3.6-35b-a3b.json")
    assert config.layer_types is not None and len(config.layer_types) == 40
    assert config.layer_types.count("full_attention") == 10
    assert config.layer_types[:4] == ("linear_attention",) * 3 + ("full_attention",)


def _edited(name: str, **changes: object) -> ModelConfig:
    data = json.loads((CONFIGS / name).read_text())
    data.update(changes)
    config = modelconfig.parse(json.dumps(data))
    assert config is not None
    return config


def test_layer_types_alone_make_a_hybrid() -> None:
    """A class the table does not know is still hybrid when its layers say mamba."""
    config = _edited(
        "llama-3.1-8b.json",
        architectures=["SomeNewHybridForCausalLM"],
        model_type="somenew",
        layer_types=["mamba", "attention", "mamba", "mamba"],
    )
    assert config.hybrid is True and config.moe is False


def test_sliding_and_full_attention_layers_are_not_hybrid() -> None:
    config = _edited("llama-3.1-8b.json", layer_types=["sliding_attention", "full_attention"])
    assert config.hybrid is False


def test_nemotron_h_pattern_is_hybrid() -> None:
    config = _edited(
        "llama-3.1-8b.json",
        architectures=["NemotronHForCausalLM"],
        model_type="nemotron_h",
        hybrid_override_pattern="M-M-M-M*-M-M-M-M*-",
    )
    assert config.hybrid is True
    unknown_class = _edited(
        "llama-3.1-8b.json", architectures=["X"], hybrid_override_pattern="M-M*-"
    )
    assert unknown_class.hybrid is True


def test_expert_count_decides_over_the_class_name() -> None:
    """Granite 4.0 H-Micro uses GraniteMoeHybridForCausalLM with no experts: dense."""
    micro = _edited(
        "llama-3.1-8b.json",
        architectures=["GraniteMoeHybridForCausalLM"],
        model_type="granitemoehybrid",
        num_local_experts=0,
    )
    assert (micro.hybrid, micro.moe) == (True, False)
    by_name = _edited("llama-3.1-8b.json", architectures=["Qwen3MoeForCausalLM"])
    assert by_name.moe is True
    deepseek_style = _edited("llama-3.1-8b.json", architectures=["X"], n_routed_experts=256)
    assert deepseek_style.moe is True
    one_expert = _edited("qwen3-30b-a3b.json", num_experts=1)
    assert one_expert.moe is False


@pytest.mark.parametrize(
    "text",
    [
        "",
        "not json",
        "[]",
        "null",
        "42",
        '"config"',
        "{" * 100000,
    ],
)
def test_odd_input_gives_none(text: str) -> None:
    assert modelconfig.parse(text) is None


@pytest.mark.parametrize(
    "data",
    [
        {},
        {"architectures": "LlamaForCausalLM"},
        {"architectures": [1, None], "layer_types": "mamba"},
        {"text_config": "x", "num_experts": "8"},
    ],
)
def test_objects_without_usable_facts_stay_unknown(data: dict[str, object]) -> None:
    assert modelconfig.parse(json.dumps(data)) == ModelConfig()


def test_wrong_typed_fields_are_ignored_not_fatal() -> None:
    config = modelconfig.parse(
        json.dumps(
            {
                "architectures": ["LlamaForCausalLM", 7],
                "num_experts": True,
                "text_config": {"layer_types": ["full_attention", None]},
            }
        )
    )
    assert config == ModelConfig(
        architectures=("LlamaForCausalLM",),
        layer_types=("full_attention",),
        hybrid=False,
        moe=False,
    )


# repo id -> (hybrid, moe); None means the name says nothing about it.
NAMES: dict[str, tuple[bool | None, bool | None]] = {
    "Qwen/Qwen3.6-27B": (True, False),
    "Qwen/Qwen3.6-35B-A3B": (True, True),
    "Qwen/Qwen3.5-397B-A17B": (True, True),
    "cyankiwi/Qwen3.6-27B-AWQ-INT4": (True, False),
    "Lorbus/Qwen3.6-27B-int4-AutoRound": (True, False),
    "QuantTrio/Qwen3.6-35B-A3B-AWQ": (True, True),
    "Qwen/Qwen3-Next-80B-A3B-Instruct": (True, True),
    "Qwen/Qwen3-Coder-Next": (True, None),
    "Qwen/Qwen3-30B-A3B": (False, True),
    "Qwen/Qwen3-32B": (False, False),
    "ai21labs/AI21-Jamba-1.5-Mini": (True, None),
    "tiiuae/Falcon-H1-34B-Instruct": (True, None),
    "ibm-granite/granite-4.0-h-small": (True, None),
    "nvidia/Nemotron-H-8B-Base-8K": (True, None),
    "nvidia/NVIDIA-Nemotron-Nano-9B-v2": (True, None),
    "mistralai/Mixtral-8x7B-Instruct-v0.1": (None, True),
    "meta-llama/Llama-4-Scout-17B-16E-Instruct": (None, True),
}


@pytest.mark.parametrize("model", sorted(NAMES))
def test_guess_from_name(model: str) -> None:
    guess = modelconfig.guess_from_name(model)
    assert guess is not None
    assert (guess.hybrid, guess.moe) == NAMES[model]
    assert guess.guessed and guess.architectures is None


@pytest.mark.parametrize(
    "model", ["meta-llama/Llama-3.1-8B-Instruct", "google/gemma-3-27b-it", "", "/", "org/"]
)
def test_names_that_say_nothing_give_none(model: str) -> None:
    assert modelconfig.guess_from_name(model) is None


def test_guess_agrees_with_the_real_configs() -> None:
    """Where both exist, the name guess and the config.json say the same."""
    pairs = {
        "Qwen/Qwen3.6-35B-A3B": "qwen3.6-35b-a3b.json",
        "Qwen/Qwen3-30B-A3B": "qwen3-30b-a3b.json",
    }
    for model, name in pairs.items():
        guess, config = modelconfig.guess_from_name(model), _config(name)
        assert guess is not None
        assert (guess.hybrid, guess.moe) == (config.hybrid, config.moe), model


def test_paths_are_read_by_their_last_component() -> None:
    assert modelconfig.guess_from_name(str(Path("/models/Qwen3.6-27B"))) == ModelConfig(
        hybrid=True, moe=False, guessed=True
    )
