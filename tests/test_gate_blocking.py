"""The gate blocks a host only on error findings about what the inventory deploys there.

The host (tests/fixtures/stack/rtx5090-driver575-stale-tools.json) has three errors about things
a llama.cpp-only deploy does not use: an old torch in a venv (ARCH-001), Docker without the
container toolkit (CTR-004), and an nvcc 13.0 the 575 driver cannot run builds of (DRV-001) and that
miscompiles llama.cpp for its RTX 5090 (LCPP-001).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from checks.facts.model import HostFacts, from_dict
from provision import blocking, gate, stack
from provision.converge_cli import _findings
from tests.conftest import FIXTURES

PROFILE = {"name": "main", "model": "/srv/models/m.gguf", "port": 8080}
REPLICA = {"name": "q", "model": "Qwen/Qwen3-8B", "port": 8000, "gpus": [0]}
NVCC_13 = "/usr/local/cuda-13.0/bin/nvcc"


def facts(name: str = "stack/rtx5090-driver575-stale-tools") -> HostFacts:
    return from_dict(HostFacts, json.loads((FIXTURES / f"{name}.json").read_text())["facts"])


def judged(data: dict[str, Any], host: HostFacts | None = None) -> gate.HostGate:
    return gate.judge("box", host or facts(), stack.from_data(data))


def verdicts(g: gate.HostGate) -> dict[str, tuple[bool, str]]:
    return {f.rule: (blocks, why) for f, blocks, why in g.errors()}


def test_llama_only_deploy_is_not_blocked_by_what_it_does_not_use() -> None:
    g = judged({"llama_server_profiles": [PROFILE]})
    assert g.nvcc == "/usr/local/cuda-12.9/bin/nvcc"
    found = verdicts(g)
    assert set(found) == {"ARCH-001", "CTR-004", "DRV-001", "LCPP-001"}
    assert not any(blocks for blocks, _ in found.values())
    assert found["CTR-004"][1] == "this inventory runs no containers here"
    assert "torch 2.6.0+cu126" in found["ARCH-001"][1]
    assert NVCC_13 in found["DRV-001"][1]
    assert not g.blocked


def test_the_nvcc_the_build_compiles_with_blocks() -> None:
    g = judged({"llama_server_profiles": [PROFILE], "llama_cpp_cuda_compiler": NVCC_13})
    blocks, why = verdicts(g)["DRV-001"]
    assert blocks and why == f"the llama.cpp build compiles with CUDA toolkit {NVCC_13}"
    # LCPP-001 (nvcc 13.0 on sm_120) twice: the toolkit itself and the planned build using it
    assert [f.rule for f in g.blockers()] == ["DRV-001", "LCPP-001", "LCPP-001"]
    assert g.blocked


def test_containers_block_where_replicas_run_in_them() -> None:
    g = judged({"vllm_replicas": [REPLICA], "nvidia_container_toolkit_install": False})
    found = verdicts(g)
    assert found["CTR-004"] == (True, "the vLLM replicas run in containers")
    assert not found["ARCH-001"][0] and not found["DRV-001"][0]
    assert g.blocked


def test_toolkit_role_takes_the_container_findings() -> None:
    g = judged({"vllm_replicas": [REPLICA], "nvidia_container_toolkit_install": True})
    assert "CTR-004" not in verdicts(g)
    assert g.toolkit and g.toolkit[0].startswith("CTR-004")


def test_driver_findings_block_what_uses_the_gpu() -> None:
    host = from_dict(
        HostFacts,
        {
            **json.loads((FIXTURES / "stack/rtx3090-cuda12.8.json").read_text())["facts"],
            "driver": {
                "version": "535.183.01",
                "kernel_module_version": "535.161.08",
                "nvml_error": "Driver/library version mismatch",
            },
        },
    )
    g = judged({"llama_server_profiles": [PROFILE]}, host)
    (finding,) = [f for f in g.findings if f.rule == "DRV-003"]
    assert verdicts(g)["DRV-003"] == (
        True,
        "the CUDA llama.cpp build needs a working NVIDIA driver and GPU",
    )
    both = blocking.Deployed(("the CUDA llama.cpp build", "the vLLM replicas"))
    assert blocking.judge(finding, True, host, both)[1].endswith(
        "replicas need a working NVIDIA driver and GPU"
    )
    assert blocking.judge(finding, True, host, blocking.Deployed()) == (
        False,
        "nothing this inventory deploys here uses the GPU",
    )


def test_plan_text_notes_each_error_and_shows_the_others_as_warnings() -> None:
    g = judged({"llama_server_profiles": [PROFILE], "llama_cpp_cuda_compiler": NVCC_13})
    shown, notes = _findings(g)
    by_rule = {f.rule: (f.severity, note) for f, note in zip(shown, notes, strict=True)}
    assert by_rule["DRV-001"] == (
        "error",
        f"Blocks apply: the llama.cpp build compiles with CUDA toolkit {NVCC_13}",
    )
    assert by_rule["CTR-004"] == ("warning", "Not blocking: this inventory runs no containers here")
    assert by_rule["ARCH-001"][0] == "warning"


def test_a_fixed_nvcc_update_is_not_flagged_on_the_build_it_makes() -> None:
    """CUDA 13.2.2 fixes LCPP-002's miscompile; nvcc itself prints only 13.2.78, so the planned
    build carries the toolkit's update and is judged the way the toolkit is."""
    host = from_dict(
        HostFacts,
        {
            "driver": {"version": "595.45.04", "cuda_version": "13.2"},
            "gpus": [{"index": 0, "name": "NVIDIA GeForce RTX 5090", "compute_capability": "12.0"}],
            "toolkits": [
                {
                    "path": "/usr/local/cuda-13.2/bin/nvcc",
                    "version": "13.2.78",
                    "release": "13.2",
                    "update": "13.2.2",
                }
            ],
        },
    )
    g = judged({"llama_server_profiles": [PROFILE]}, host)
    assert g.nvcc == "/usr/local/cuda-13.2/bin/nvcc"
    assert (g.findings, g.problems) == ([], [])
    older = judged(
        {"llama_server_profiles": [PROFILE]},
        from_dict(
            HostFacts,
            {
                **dataclasses.asdict(host),
                "toolkits": [{**dataclasses.asdict(host.toolkits[0]), "update": "13.2.1"}],
            },
        ),
    )
    assert (older.install_cuda, older.nvcc) == ("13.1", "/usr/local/cuda-13.1/bin/nvcc")
    assert verdicts(older) == {
        "LCPP-002": (
            False,
            "nothing this inventory deploys here uses CUDA toolkit /usr/local/cuda-13.2/bin/nvcc",
        )
    }
