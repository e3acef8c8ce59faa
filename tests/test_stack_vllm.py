"""vLLM replicas, the balancer and the toolkit settings in a host's stack: defaults and bad values.

Each bad value raises StackError naming the field, before any host is touched; secrets are read
from this machine's environment only.
"""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

import pytest

from provision import deploy, hostplan, stack
from provision.stack import StackError

ROOT = Path(__file__).resolve().parent.parent
R1 = {"name": "qwen-1", "model": "Qwen/Qwen3.6-27B", "port": 8500, "gpus": [0]}
UTIL = "vllm_replicas[0].gpu_memory_utilization"
R2 = {"name": "qwen-2", "model": "Qwen/Qwen3.6-27B", "port": 8501, "gpus": [1]}


def replicas(*items: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"vllm_replicas": list(items), **more}


def test_replica_takes_the_defaults() -> None:
    s = stack.from_data(replicas(R1))
    (r,) = s.vllm.replicas
    assert r == stack.Replica(name="qwen-1", model="Qwen/Qwen3.6-27B", port=8500, gpus=(0,))
    assert (r.unit, r.container, r.served) == (
        "gpuprov-vllm-qwen-1.service",
        "gpuprov-vllm-qwen-1",
        "Qwen/Qwen3.6-27B",
    )
    assert s.vllm.version == "v0.21.0"
    assert (s.balancer.enabled, s.toolkit.install, s.toolkit.mode) == (False, True, "docker")
    assert not s.builds_llama  # a vLLM-only host builds no llama.cpp


def test_empty_host_still_builds_llama() -> None:
    assert stack.from_data({}).builds_llama


def test_tensor_parallel_follows_the_gpus() -> None:
    (r,) = stack.from_data(replicas({**R1, "gpus": [0, 1], "expert_parallel": True})).vllm.replicas
    assert (r.tensor_parallel_size, r.expert_parallel) == (2, True)


def test_defaults_from_data_merge_under_each_replica() -> None:
    data = replicas(R1, R2, vllm_defaults={"max_num_seqs": 2, "gpu_memory_utilization": 0.92})
    assert [r.max_num_seqs for r in stack.from_data(data).vllm.replicas] == [2, 2]


def test_speculative_config_is_compact_json() -> None:
    spec = {"num_speculative_tokens": 3, "method": "mtp"}
    (r,) = stack.from_data(replicas({**R1, "speculative_config": spec})).vllm.replicas
    assert r.speculative_config == '{"method":"mtp","num_speculative_tokens":3}'


@pytest.mark.parametrize(
    ("data", "field"),
    [
        (replicas({**R1, "gpus": []}), "vllm_replicas[0].gpus"),
        (replicas({**R1, "gpus": [0, 0]}), "vllm_replicas[0].gpus"),
        (replicas({**R1, "gpus": ["0"]}), "vllm_replicas[0].gpus"),
        (replicas({**R1, "gpus": [True]}), "vllm_replicas[0].gpus"),
        (replicas({**R1, "tensor_parallel_size": 2}), "vllm_replicas[0].tensor_parallel_size"),
        (replicas({**R1, "model": "not a repo"}), "vllm_replicas[0].model"),
        (replicas({**R1, "model": "/srv/../etc"}), "vllm_replicas[0].model"),
        (
            replicas({**R1, "gpu_memory_utilization": 1.5}),
            "vllm_replicas[0].gpu_memory_utilization",
        ),
        (replicas({**R1, "gpu_memory_utilization": 0}), UTIL),
        (
            replicas({**R1, "gpu_memory_utilization": "0.9"}),
            "vllm_replicas[0].gpu_memory_utilization",
        ),
        (replicas({**R1, "host": "127.0.0.1 -v /:/host"}), "vllm_replicas[0].host"),
        (replicas({**R1, "kv_cache_dtype": "fp8 --x"}), "vllm_replicas[0].kv_cache_dtype"),
        (replicas({**R1, "shm_size": "16 g"}), "vllm_replicas[0].shm_size"),
        (replicas({**R1, "speculative_config": "mtp"}), "vllm_replicas[0].speculative_config"),
        (replicas({**R1, "hf_token_env": "hf-token"}), "vllm_replicas[0].hf_token_env"),
        (replicas({**R1, "env": {"HF_TOKEN": "x"}}), "vllm_replicas[0].env.HF_TOKEN"),
        (replicas({**R1, "env": {"A": "x\ny"}}), "vllm_replicas[0].env.A"),
        (replicas({**R1, "env": {"1A": "x"}}), "vllm_replicas[0].env"),
        (replicas({**R1, "env": ["A=1"]}), "vllm_replicas[0].env"),
        (replicas({**R1, "extra_args": "--x"}), "vllm_replicas[0].extra_args"),
        (replicas({**R1, "gpu": [0]}), "vllm_replicas[0].gpu"),
        (replicas({**R1, "name": "Qwen 1"}), "vllm_replicas[0].name"),
        (replicas(R1, {**R2, "name": "qwen-1"}), "vllm_replicas[1].name"),
        (replicas(R1, {**R2, "port": 8500}), "vllm_replicas (qwen-2)"),
        (
            {**replicas(R1), "llama_server_profiles": [{"name": "m", "model": "/m", "port": 8500}]},
            "vllm_replicas (qwen-1)",
        ),
        (replicas(R1, nginx_lb_enabled=True, nginx_lb_listen=8500), "nginx_lb_listen"),
        (replicas(R1, nginx_lb_bind="0.0.0.0; include x"), "nginx_lb_bind"),
        (replicas(R1, vllm_version="latest"), "vllm_version"),
        (replicas(R1, vllm_image="vllm/vllm-openai:v1 --privileged"), "vllm_image"),
        (replicas(R1, vllm_engine="/usr/bin/my docker"), "vllm_engine"),
        (replicas(R1, vllm_gpu_selection="all"), "vllm_gpu_selection"),
        (replicas(R1, nvidia_container_toolkit_mode="podman"), "nvidia_container_toolkit_mode"),
        (replicas(R1, vllm_model_cache="cache"), "vllm_model_cache"),
        ({"vllm_replicas": {"name": "x"}}, "vllm_replicas"),
        ({"vllm_replicas": ["x"]}, "vllm_replicas[0]"),
    ],
)
def test_bad_value_names_its_field(data: dict[str, Any], field: str) -> None:
    with pytest.raises(StackError) as err:
        stack.from_data(data)
    assert err.value.field == field


def test_balancer_may_share_no_port_when_disabled() -> None:
    s = stack.from_data(replicas(R1, nginx_lb_listen=8500))
    assert not s.balancer.enabled


def test_replica_secrets_come_from_the_environment() -> None:
    s = stack.from_data(replicas({**R1, "hf_token_env": "MY_HF", "api_key_env": "MY_KEY"}))
    found = hostplan.secrets(s, {"MY_HF": "hf_x", "MY_KEY": "k"})
    assert found == {"vllm/qwen-1/HF_TOKEN": "hf_x", "vllm/qwen-1/VLLM_API_KEY": "k"}
    with pytest.raises(StackError) as err:
        hostplan.secrets(s, {"MY_HF": "hf_x"})
    assert err.value.field == "vllm_replicas[0].api_key_env"


@pytest.mark.parametrize("name", sorted(p.name for p in (ROOT / "inventories").glob("*.py")))
def test_shipped_inventories_validate(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_test")
    path = str(ROOT / "inventories" / name)
    _, _, hosts = deploy.load_inventory(path)
    stacks = deploy.validate(path, hosts)
    assert stacks


def test_seed_003_inventories() -> None:
    """The dense stack: 2 replicas, one per GPU, behind the balancer; the MoE: TP=2 + EP."""
    dense = runpy.run_path(str(ROOT / "inventories" / "dual3090_replicas.py"))["boxes"][0][1]
    s = stack.from_data(dense)
    assert [(r.gpus, r.port) for r in s.vllm.replicas] == [((0,), 8500), ((1,), 8501)]
    assert (s.balancer.enabled, s.balancer.listen) == (True, 8400)
    moe = runpy.run_path(str(ROOT / "inventories" / "dual3090_moe.py"))["boxes"][0][1]
    (r,) = stack.from_data(moe).vllm.replicas
    assert (r.gpus, r.tensor_parallel_size, r.expert_parallel, r.speculative_config) == (
        (0, 1),
        2,
        True,
        "",
    )
