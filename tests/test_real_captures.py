"""Every third-party capture in tests/fixtures/real/ read through --from: the facts come out right.

The captures are copies of ../shared/fixtures/real/ (provenance in MANIFEST.tsv); when that folder
is beside the checkout, the copies must still match it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from checks.facts import capture, gpus
from provision.cli import app
from tests.conftest import REAL

SHARED = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "real"
FILES = sorted(p.name for p in REAL.iterdir() if p.name != "MANIFEST.tsv")

# file -> (driver, driver CUDA, GPU names, compute capabilities); None: the capture does not say.
EXPECTED: dict[str, tuple[str | None, str | None, list[str], list[str]]] = {
    "nvsmi_xml__telegraf_rtx-3060-v12.xml": (
        "570.124.04",
        "12.8",
        ["NVIDIA GeForce RTX 3060"],
        ["8.6"],
    ),
    "nvsmi_xml__telegraf_a100-sxm4-80gb-mig-v12.xml": (
        "535.54.03",
        "12.2",
        ["NVIDIA A100-SXM4-80GB"],
        ["8.0"],
    ),
    "nvsmi_table__triton-on-computecanada_a100-sxm4-40gb_550.144.03.txt": (
        "550.144.03",
        "12.4",
        ["NVIDIA A100-SXM4-40GB"],
        ["8.0"],
    ),
    "nvsmi_table__exporter_h200_610.43.02_kmd-header.txt": (
        "610.43.02",
        "13.3",
        ["NVIDIA H200"],
        ["9.0"],
    ),
    "nvsmi_table__muscles-codebook_8x-v100s_535.171.04.txt": (
        "535.171.04",
        "12.2",
        ["Tesla V100S-PCIE-32GB"] * 8,
        ["7.0"] * 8,
    ),
    "nvsmi_query-csv_L__triton-pr8070_titanv-rtx5880ada_570.86.15.txt": (
        "570.86.15",
        None,
        ["NVIDIA TITAN V", "NVIDIA RTX 5880 Ada Generation"],
        ["7.0", "8.9"],
    ),
    "err_containercli_cuda12.8__tabbyapi-324.txt": ("550.144.03", "12.4", [], []),
    "err_nokernel_vllm__vllm-18995_rtx5090-docker.txt": ("570.133.20", "12.8", [], []),
    "err804_ggml__llamacpp-3247_rtx3090-525.txt": ("525.105.17", "12.0", [], []),
    "err_sm120_collect-env__pytorch-150733_rtx5090D.txt": (
        "570.124.04",
        None,
        ["NVIDIA GeForce RTX 5090 D"],
        ["12.0"],
    ),
    "llamacpp_init__ggml-15294_2x-rtx3090.txt": (
        None,
        None,
        ["NVIDIA GeForce RTX 3090"] * 2,
        ["8.6"] * 2,
    ),
    "llamacpp_init_sysinfo__ggml-pr14363_rtx4070super.txt": (
        None,
        None,
        ["NVIDIA GeForce RTX 4070 SUPER"],
        ["8.9"],
    ),
    "err_nvml-mismatch__tinygrad-ogkm-47.txt": (None, None, [], []),
    "err_nvsmi-failed_secureboot__nvautoinstall-75_rtx2060s.txt": (None, None, [], []),
    "nvcc_version__flash-attn-1921_12.6.txt": (None, None, [], []),
    "nvcc_version__katago-pr1115_13.0-list-gpu-arch.txt": (None, None, [], []),
    "nvidia-ctk_version__nct-50_1.12.0.txt": (None, None, [], []),
    "docker_info_json__llamaland_fedora41_nvidia-runtime-cdi.json": (None, None, [], []),
}

# Crash logs with no host facts in them: `check --from` says so and exits 2.
LOGS_WITHOUT_FACTS = {
    "err804__vllm-4940_docker-run.txt",
    "err_couldnotselect__xagent-273_4x4090.txt",
    "err_cudagraph-oom__vllm-19186_capture-end.txt",
    "err_turboquant-hybrid__vllm-40124_qwen36-35b-a3b.txt",
    "err_workspace-locked__vllm-pr48179_moe-modular-kernel.txt",
}


def test_every_capture_has_an_expectation() -> None:
    assert set(FILES) == set(EXPECTED) | LOGS_WITHOUT_FACTS


@pytest.mark.skipif(
    not SHARED.is_dir(), reason="../shared/fixtures/real is not beside this checkout"
)
def test_copies_match_the_shared_captures() -> None:
    for name in ["MANIFEST.tsv", *FILES]:
        assert (REAL / name).read_bytes() == (SHARED / name).read_bytes(), name
    assert {p.name for p in SHARED.iterdir()} == {"MANIFEST.tsv", *FILES}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_facts_from_capture(name: str) -> None:
    driver, cuda, names, ccs = EXPECTED[name]
    facts = gpus.enrich(capture.load([str(REAL / name)]))
    assert facts.driver.version == driver
    assert facts.driver.cuda_version == cuda
    assert [g.name for g in facts.gpus] == names
    assert [g.compute_capability for g in facts.gpus] == ccs


def test_toolkits_and_containers_from_captures() -> None:
    nvcc = capture.load([str(REAL / "nvcc_version__katago-pr1115_13.0-list-gpu-arch.txt")])
    assert [(t.release, t.version) for t in nvcc.toolkits] == [("13.0", "13.0.88")]
    assert nvcc.toolkits[0].gpu_archs is not None and nvcc.toolkits[0].gpu_archs[0] == "compute_75"
    ctk = capture.load([str(REAL / "nvidia-ctk_version__nct-50_1.12.0.txt")])
    assert ctk.containers.toolkit_version == "1.12.0"
    docker = capture.load(
        [str(REAL / "docker_info_json__llamaland_fedora41_nvidia-runtime-cdi.json")]
    )
    assert docker.containers.docker is not None
    assert docker.containers.docker.server_version == "28.2.2"
    assert docker.containers.docker.runtimes == ["io.containerd.runc.v2", "nvidia", "runc"]
    assert "nvidia.com/gpu=all" in (docker.containers.docker.cdi_devices or [])
    mismatch = capture.load([str(REAL / "err_nvml-mismatch__tinygrad-ogkm-47.txt")])
    assert mismatch.driver.nvml_error == "Driver/library version mismatch"
    assert mismatch.driver.nvml_library_version == "570.124"


@pytest.mark.parametrize("name", FILES)
def test_check_from_every_capture_never_crashes(name: str) -> None:
    result = CliRunner().invoke(app, ["check", "--json", "--from", str(REAL / name)])
    if name in LOGS_WITHOUT_FACTS:
        assert result.exit_code == 2
        assert name in result.stderr
        return
    assert result.exit_code in (0, 1), result.output
    json.loads(result.stdout)


def test_merged_captures_give_findings() -> None:
    """A user pastes nvidia-smi and collect_env: torch cu126 on an RTX 5090 D is ARCH-001."""
    facts = gpus.enrich(
        capture.load(
            [
                str(REAL / "err_sm120_collect-env__pytorch-150733_rtx5090D.txt"),
                str(REAL / "err_nokernel_vllm__vllm-18995_rtx5090-docker.txt"),
            ]
        )
    )
    from checks.matrix import engine

    rules = {f.rule for f in engine.evaluate(facts)}
    assert "ARCH-001" in rules
