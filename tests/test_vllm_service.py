"""`vllm serve` arguments parsed as vLLM's FlexibleArgumentParser reads them.

The command lines come from the seed write-ups, vLLM's docs and the serve_args of this project's
replicas; each case names the fields it expects.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
from typing import Any

import pytest

from checks.facts.model import HostFacts, VllmService, from_dict, merge, to_dict
from checks.matrix import engine
from checks.services import modelconfig, vllm_service
from provision import vllm as vllm_cmd
from provision.stack import Replica
from tests.conftest import FIXTURES

MTP3 = '{"method":"mtp","num_speculative_tokens":3}'

# name -> (command line after the image, as a shell would split it; expected fields)
CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "seed003-round1-stage2": (
        "--model cyankiwi/Qwen3.6-27B-AWQ-INT4 --tensor-parallel-size 2"
        " --gpu-memory-utilization 0.83 --max-model-len 16384 --max-num-seqs 8"
        " --kv-cache-dtype fp8 --enable-prefix-caching",
        {
            "model": "cyankiwi/Qwen3.6-27B-AWQ-INT4",
            "tensor_parallel_size": 2,
            "gpu_memory_utilization": 0.83,
            "max_num_seqs": 8,
            "kv_cache_dtype": "fp8",
            "enforce_eager": False,
            "expert_parallel": False,
            "speculative_method": None,
        },
    ),
    "seed003-single-3090": (
        "serve /model --served-model-name qwen36-27b --quantization auto_round --dtype float16"
        " --tensor-parallel-size 1 --max-model-len 20000 --gpu-memory-utilization 0.97"
        " --max-num-seqs 1 --kv-cache-dtype fp8_e5m2 --trust-remote-code"
        """ --speculative-config "{\\"method\\":\\"mtp\\",\\"num_speculative_tokens\\":5}\""""
        " --host 0.0.0.0 --port 8000",
        {
            "model": "/model",
            "gpu_memory_utilization": 0.97,
            "max_num_seqs": 1,
            "kv_cache_dtype": "fp8_e5m2",
            "speculative_method": "mtp",
            "tensor_parallel_size": 1,
        },
    ),
    "seed003-moe": (
        "--model /snapshot --quantization awq_marlin --dtype float16 --tensor-parallel-size 2"
        " --enable-expert-parallel --max-model-len 32000 --gpu-memory-utilization 0.92"
        " --max-num-seqs 4 --max-num-batched-tokens 4096 --kv-cache-dtype fp8_e5m2"
        " --enable-prefix-caching --enable-chunked-prefill",
        {
            "model": "/snapshot",
            "expert_parallel": True,
            "max_num_seqs": 4,
            "tensor_parallel_size": 2,
            "gpu_memory_utilization": 0.92,
        },
    ),
    "positional-model-and-short-flags": (
        f"Qwen/Qwen3-8B -tp 2 -ep --speculative-config '{MTP3}'",
        {
            "model": "Qwen/Qwen3-8B",
            "tensor_parallel_size": 2,
            "expert_parallel": True,
            "speculative_method": "mtp",
        },
    ),
    "vllm-serve-prefix": (
        "vllm serve meta-llama/Llama-3.1-8B --max-num-seqs 16",
        {"model": "meta-llama/Llama-3.1-8B", "max_num_seqs": 16},
    ),
    "equals-forms": (
        "--model=Qwen/Qwen3.6-27B --kv-cache-dtype=turboquant_k8v4"
        f" --gpu-memory-utilization=0.9 --tensor-parallel-size=2 --speculative-config='{MTP3}'",
        {
            "model": "Qwen/Qwen3.6-27B",
            "kv_cache_dtype": "turboquant_k8v4",
            "gpu_memory_utilization": 0.9,
            "tensor_parallel_size": 2,
            "speculative_method": "mtp",
        },
    ),
    "underscores": (
        "--model m --max_num_seqs 6 --gpu_memory_utilization=0.8 --enforce_eager",
        {"max_num_seqs": 6, "gpu_memory_utilization": 0.8, "enforce_eager": True},
    ),
    "last-one-wins": (
        "--model a --max-num-seqs 8 --kv-cache-dtype turboquant_k8v4"
        " --model b --max-num-seqs=2 --kv-cache-dtype fp8",
        {"model": "b", "max_num_seqs": 2, "kv_cache_dtype": "fp8"},
    ),
    "negated-switches": (
        "m --enforce-eager --enable-expert-parallel --no-enforce-eager --no-enable-expert-parallel",
        {"enforce_eager": False, "expert_parallel": False},
    ),
    "negation-then-switch": (
        "m --no-enforce-eager --enforce-eager",
        {"enforce_eager": True},
    ),
    "dotted-json": (
        "m --speculative-config.method qwen3_next_mtp"
        " --speculative-config.num_speculative_tokens 2 --compilation-config.cudagraph_mode=NONE",
        {"speculative_method": "qwen3_next_mtp", "cudagraph_mode": "NONE"},
    ),
    "dotted-replaces-whole-json": (
        f"m --speculative-config.num_speculative_tokens 2 --speculative-config '{MTP3}'",
        {"speculative_method": None},
    ),
    "compilation-config-json": (
        "m --compilation-config"
        """ '{"cudagraph_mode":"piecewise","max_cudagraph_capture_size":16}'""",
        {"cudagraph_mode": "piecewise"},
    ),
    "speculative-without-method": (
        """m --speculative-config '{"model":"x/eagle","num_speculative_tokens":3}'""",
        {"speculative_method": None},
    ),
    "bad-values": (
        "m --max-num-seqs many --gpu-memory-utilization high"
        " --speculative-config '{not json' --compilation-config '[1, 2]'",
        {
            "max_num_seqs": None,
            "gpu_memory_utilization": None,
            "speculative_method": None,
            "cudagraph_mode": None,
        },
    ),
    "unknown-flags-take-their-values": (
        "m --max-model-len -1 --served-model-name x --trust-remote-code --max-num-seqs 3",
        {"model": "m", "max_num_seqs": 3},
    ),
    "config-file-leaves-switches-unknown": (
        "m --config /etc/vllm/serve.yaml --max-num-seqs 4",
        {"enforce_eager": None, "expert_parallel": None, "max_num_seqs": 4},
    ),
    "config-file-with-explicit-switch": (
        "m --config /etc/vllm/serve.yaml --enforce-eager",
        {"enforce_eager": True, "expert_parallel": None},
    ),
    "nothing-set": (
        "",
        {
            "model": None,
            "kv_cache_dtype": None,
            "max_num_seqs": None,
            "gpu_memory_utilization": None,
            "enforce_eager": False,
            "expert_parallel": False,
            "tensor_parallel_size": None,
        },
    ),
    "flag-without-value-at-the-end": (
        "m --max-num-seqs",
        {"model": "m", "max_num_seqs": None},
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_argv_forms(case: str) -> None:
    line, expected = CASES[case]
    argv = shlex.split(line)
    service = vllm_service.service("r", "vllm/vllm-openai:v0.21.0", "0.21.0", argv, None)
    assert service.argv == argv
    assert {k: getattr(service, k) for k in expected} == expected


def test_model_config_is_copied_onto_the_service() -> None:
    text = (FIXTURES / "modelconfig" / "qwen3.6-35b-a3b.json").read_text()
    service = vllm_service.service(
        "qwen-1", "img", None, ["Qwen/Qwen3.6-35B-A3B"], modelconfig.parse(text)
    )
    assert service.architectures == ["Qwen3_5MoeForConditionalGeneration"]
    assert service.layer_types is not None and len(service.layer_types) == 40
    assert (service.hybrid, service.moe, service.model_guessed) == (True, True, False)
    guessed = vllm_service.service(
        "qwen-1", "img", None, ["Qwen/Qwen3.6-27B"], modelconfig.guess_from_name("Qwen/Qwen3.6-27B")
    )
    assert (guessed.hybrid, guessed.moe, guessed.model_guessed) == (True, False, True)
    assert guessed.architectures is None
    unknown = vllm_service.service("x", "", None, ["/models/x"], None)
    assert (unknown.hybrid, unknown.moe, unknown.image) == (None, None, None)


def test_serve_args_of_a_replica_round_trip() -> None:
    """What provision/vllm.py puts after the image reads back as the replica's settings."""
    r = Replica(
        name="moe",
        model="Qwen/Qwen3.6-35B-A3B",
        port=8500,
        gpus=(0, 1),
        gpu_memory_utilization=0.92,
        tensor_parallel_size=2,
        expert_parallel=True,
        max_num_seqs=4,
        kv_cache_dtype="fp8_e5m2",
        enforce_eager=True,
        speculative_config=MTP3,
    )
    service = vllm_service.service(r.name, "img", None, vllm_cmd.serve_args(r), None)
    assert service.model == r.model
    assert service.gpu_memory_utilization == pytest.approx(0.92)
    assert (service.tensor_parallel_size, service.expert_parallel) == (2, True)
    assert (service.max_num_seqs, service.kv_cache_dtype) == (4, "fp8_e5m2")
    assert (service.enforce_eager, service.speculative_method) == (True, "mtp")


def test_service_survives_the_facts_json_round_trip() -> None:
    service = vllm_service.service(
        "qwen-1", "img", "0.21.0", ["m", "--gpu-memory-utilization", "1", "-tp", "2"], None
    )
    facts = HostFacts(vllm_services=[service])
    back = from_dict(HostFacts, to_dict(facts))
    assert back.vllm_services == [service]
    assert isinstance(back.vllm_services[0].gpu_memory_utilization, float)


def test_facts_reject_a_non_number_share() -> None:
    data = to_dict(HostFacts(vllm_services=[VllmService(name="x")]))
    data["vllm_services"][0]["gpu_memory_utilization"] = "0.9"
    with pytest.raises(ValueError, match="expected a number"):
        from_dict(HostFacts, data)


def test_services_merge_by_name() -> None:
    base = HostFacts(vllm_services=[VllmService(name="a", model="m", max_num_seqs=None)])
    extra = HostFacts(
        vllm_services=[
            VllmService(name="a", model="other", max_num_seqs=4),
            VllmService(name="b", model="n"),
        ]
    )
    merged = merge(base, extra)
    assert [dataclasses.astuple(s)[:2] for s in merged.vllm_services] == [("a", None), ("b", None)]
    first = merged.vllm_services[0]
    assert (first.model, first.max_num_seqs) == ("m", 4)


def _findings(rule: str, case: str) -> list[str]:
    data = json.loads((FIXTURES / "rules" / rule / f"{case}.json").read_text())
    facts = from_dict(HostFacts, data["facts"])
    return [f.message for f in engine.evaluate(facts) if f.rule == rule]


def test_turboquant_finding_hedges_only_what_is_guessed() -> None:
    """A config.json and a release tag give a firm finding; a name or a nightly, "probably"."""
    (firm,) = _findings("VLLM-001", "fail")
    assert "will not start" in firm and "probably" not in firm and "vLLM 0.20.0" in firm
    (hedged,) = _findings("VLLM-001", "fail-nightly")
    assert "will probably not start" in hedged
    assert "probably a hybrid model (guessed from its name" in hedged
    (regressed,) = _findings("VLLM-001", "fail-v0.25")
    assert "Unknown TurboQuant cache dtype" in regressed and "vllm#50709" in regressed


def test_findings_name_the_replica() -> None:
    for rule in ("VLLM-001", "VLLM-005", "VLLM-006", "VLLM-007", "VLLM-008"):
        (message, *_) = _findings(rule, "fail")
        assert message.startswith("replica "), (rule, message)
