"""The gate for hosts with vLLM replicas: the image, the toolkit, the flag lint, the VRAM budget.

Host facts are the recorded dual RTX 3090 / H100 fixtures (tests/fixtures/images/host_*.json)
with Docker as `docker info` reported it on a toolkit-configured host; the image environments
are the published images' (tests/fixtures/images/vllm-openai_*.json); GGUF headers come from a
real file written with the gguf package and read by the same script the host runs.
"""

from __future__ import annotations

import json
import runpy
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pytest import MonkeyPatch

from checks.facts.model import Docker, HostFacts, from_dict
from checks.matrix import evaluators, registry
from provision import gate, servicefacts, stack
from tests.conftest import FIXTURES
from tests.support import tiny_gguf

ROOT = Path(__file__).resolve().parent.parent
IMAGES = FIXTURES / "images"
R1 = {"name": "qwen-1", "model": "Lorbus/Qwen3.6-27B-int4-AutoRound", "port": 8500, "gpus": [0]}
R2 = {**R1, "name": "qwen-2", "port": 8501, "gpus": [1]}


def facts(name: str, docker: bool = True, nvidia_runtime: bool = True) -> HostFacts:
    found = from_dict(HostFacts, json.loads((IMAGES / f"{name}.json").read_text())["facts"])
    if docker:
        runtimes = ["io.containerd.runc.v2", "runc"] + (["nvidia"] if nvidia_runtime else [])
        found.containers.docker = Docker(client_version="28.2.2", server_version="28.2.2")
        found.containers.docker.runtimes = runtimes
        found.containers.toolkit_version = "1.18.0" if nvidia_runtime else None
        found.containers.runtime_hook = nvidia_runtime
    return found


def inspect(ref: str) -> str:
    return (IMAGES / f"vllm-openai_{ref.split(':', 1)[1]}.json").read_text()


def judged(
    host: str, data: dict[str, Any], found: servicefacts.ServiceFacts | None = None, **kw: Any
) -> gate.HostGate:
    s = stack.from_data(data)
    verdict = gate.judge("box", facts(host, **kw), s)
    gate.judge_services(verdict, s, found or servicefacts.ServiceFacts())
    return verdict


def rules(verdict: gate.HostGate) -> set[str]:
    return {f.rule for f in verdict.findings}


def test_driver_580_gets_the_cuda13_tag_and_fits() -> None:
    verdict = judged("host_dual3090_580", {"vllm_replicas": [R1, R2]})
    assert verdict.image == "vllm/vllm-openai:v0.21.0"
    assert verdict.problems == []
    assert verdict.plan is None  # a vLLM-only host builds no llama.cpp
    assert verdict.budget is not None and verdict.budget.fits
    assert not verdict.blocked


def test_driver_570_has_no_tag_of_the_release() -> None:
    verdict = judged("host_dual3090_570", {"vllm_replicas": [R1]})
    assert verdict.image == ""
    assert any(p.startswith("vLLM image:") and "575" in p for p in verdict.problems)
    assert verdict.blocked


def test_present_image_is_checked_at_the_gate() -> None:
    """A pinned CUDA 13.0 image already on a 570 host: "unsatisfied condition" predicted."""
    ref = "vllm/vllm-openai:v0.23.0"
    found = servicefacts.ServiceFacts(inspect=inspect(ref))
    verdict = judged("host_dual3090_570", {"vllm_replicas": [R1], "vllm_image": ref}, found)
    assert verdict.image == ref and verdict.image_present
    assert "CTR-001" in rules(verdict)
    assert verdict.blocked


def test_present_image_that_runs_passes() -> None:
    ref = "vllm/vllm-openai:v0.9.0"
    found = servicefacts.ServiceFacts(inspect=inspect(ref))
    verdict = judged("host_dual3090_570", {"vllm_replicas": [R1], "vllm_image": ref}, found)
    assert verdict.image_present
    assert not {"CTR-001", "CTR-002"} & rules(verdict)
    assert not verdict.blocked


def test_missing_toolkit_is_planned_not_blocking() -> None:
    verdict = judged("host_dual3090_580", {"vllm_replicas": [R1]}, nvidia_runtime=False)
    assert not {"CTR-004", "CTR-005"} & rules(verdict)
    assert verdict.toolkit and "nvidia_container_toolkit" in verdict.toolkit[0]
    off = judged(
        "host_dual3090_580",
        {"vllm_replicas": [R1], "nvidia_container_toolkit_install": False},
        nvidia_runtime=False,
    )
    assert {"CTR-004", "CTR-005"} & rules(off)
    assert off.blocked


def test_no_docker_is_a_problem() -> None:
    verdict = judged("host_dual3090_580", {"vllm_replicas": [R1]}, docker=False)
    assert any("/usr/bin/docker is not installed" in p for p in verdict.problems)


def test_third_replica_on_gpu_0_does_not_fit() -> None:
    third = {**R1, "name": "qwen-3", "port": 8502, "gpu_memory_utilization": 0.5}
    verdict = judged("host_dual3090_580", {"vllm_replicas": [R1, R2, third]})
    assert verdict.budget is not None and not verdict.budget.fits
    assert any("VRAM" in p for p in verdict.problems)
    table = "\n".join(verdict.budget.lines())
    assert "gpuprov-vllm-qwen-3.service" in table


def test_lint_reads_the_host_config_of_a_local_model() -> None:
    text = (FIXTURES / "modelconfig" / "qwen3.6-35b-a3b.json").read_text()
    replica = {
        **R1,
        "model": "/srv/models/qwen36-moe",
        "speculative_config": {"method": "mtp", "num_speculative_tokens": 3},
        "max_num_seqs": 8,
    }
    found = servicefacts.ServiceFacts(configs={"qwen-1": text})
    verdict = judged("host_dual3090_580", {"vllm_replicas": [replica]}, found)
    assert {"VLLM-005", "VLLM-006"} <= rules(verdict)
    subjects = {f.subject for f in verdict.findings if f.rule.startswith("VLLM")}
    assert subjects == {"replica qwen-1"}


def test_turboquant_on_a_hybrid_is_refused_by_name_when_no_config_is_there() -> None:
    replica = {**R1, "model": "Qwen/Qwen3.6-27B", "kv_cache_dtype": "turboquant_k8v4"}
    verdict = judged(
        "host_dual3090_580",
        {"vllm_replicas": [replica], "vllm_image": "vllm/vllm-openai:v0.20.0"},
    )
    assert "VLLM-001" in rules(verdict)
    assert verdict.blocked


def test_an_image_pinned_by_digest_is_judged_by_the_release_it_carries() -> None:
    """The ref names no release; the pulled image's RepoTags do (v0.23.0: hybrid TurboQuant
    starts there), so VLLM-001 speaks of that release, not of "no release"."""
    replica = {**R1, "model": "Qwen/Qwen3.6-27B", "kv_cache_dtype": "turboquant_k8v4"}
    digest = "vllm/vllm-openai@sha256:" + "0" * 64
    data = {"vllm_replicas": [replica], "vllm_image": digest}
    unread = judged("host_dual3090_580", data)
    assert "the image names no vLLM release" in next(
        f.message for f in unread.findings if f.rule == "VLLM-001"
    )
    pulled = judged(
        "host_dual3090_580", data, servicefacts.ServiceFacts(inspect=inspect("x:v0.23.0"))
    )
    assert "VLLM-001" not in rules(pulled)


def test_seed_inventories_pass_the_gate_on_driver_580() -> None:
    for name in ("dual3090_replicas.py", "dual3090_moe.py"):
        data = runpy.run_path(str(ROOT / "inventories" / name))["boxes"][0][1]
        verdict = judged("host_dual3090_580", data)
        assert not verdict.blocked, (name, verdict.problems, rules(verdict))
        assert verdict.budget is not None and verdict.budget.fits


def test_llama_profiles_count_weights_and_kv_from_the_gguf(tmp_path: Path) -> None:
    """The header is read by the command the host runs (here through /bin/sh)."""
    model = tiny_gguf.write(tmp_path / "tiny.gguf")
    out = tiny_gguf.header_read_on_a_host(model)
    profile = {"name": "tiny", "model": str(model), "port": 8080, "ctx_size": 512}
    found = servicefacts.ServiceFacts(gguf={str(model): out})
    data = {"llama_server_profiles": [profile], "vllm_replicas": [R1]}
    verdict = judged("host_dual3090_580", data, found)
    assert verdict.plan is not None and verdict.plan.cuda
    assert verdict.budget is not None
    table = "\n".join(verdict.budget.lines())
    assert "gpuprov-llama-tiny.service" in table and "unknown" not in table


def test_service_reads_are_framed_and_parsed(tmp_path: Path) -> None:
    """The script the gate sends, run locally: a cached snapshot's config.json is found."""
    cache = tmp_path / "hf"
    snapshot = cache / "hub" / "models--Org--Model" / "snapshots" / "abc"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}')
    data = {
        "vllm_model_cache": str(cache),
        "vllm_replicas": [
            {**R1, "model": "Org/Model"},
            {**R2, "model": "Org/Absent"},
        ],
    }
    s = stack.from_data(data)
    out = subprocess.run(
        ["/bin/sh", "-c", servicefacts.script(s, "")], capture_output=True, text=True, check=True
    ).stdout
    found = servicefacts.parse(s, "", out)
    assert found.configs == {"qwen-1": '{"architectures": ["LlamaForCausalLM"]}', "qwen-2": None}
    assert found.inspect is None


def test_every_vllm_rule_with_an_evaluator_judges_planned_services() -> None:
    """A vLLM rule on facts.vllm_services reaches the gate's lint through its detected_by."""
    vllm_fact_rules = {r.id for r in registry.rules() if r.area == "vllm" and r.check}
    assert vllm_fact_rules <= {r.id for r in registry.routed("planned-services")}


def _service_subjects(facts: HostFacts, params: Mapping[str, Any]) -> Iterator[dict[str, str]]:
    """A stand-in evaluator: one match per planned service, whatever the rule."""
    for server in facts.llama_servers:
        yield {"subject": f"llama-server {server.name}"}
    for service in facts.vllm_services:
        yield {"subject": f"vLLM {service.name}"}


def test_the_gate_applies_exactly_the_planned_services_rules(monkeypatch: MonkeyPatch) -> None:
    """Every rule detected by planned-services judges the profiles and the replicas; no other."""
    for name in evaluators.EVALUATORS:
        monkeypatch.setitem(evaluators.EVALUATORS, name, _service_subjects)
    profile = {"name": "main", "model": "/srv/models/m.gguf", "port": 8080}
    data = {"llama_server_profiles": [profile], "vllm_replicas": [R1]}
    verdict = judged("host_dual3090_580", data)
    wanted = {r.id for r in registry.routed("planned-services")}
    for subject in ("llama-server main", "vLLM qwen-1"):
        assert {f.rule for f in verdict.findings if f.subject == subject} == wanted, subject
