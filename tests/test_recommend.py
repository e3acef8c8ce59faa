"""Recommendations: llama.cpp flags, nvcc, vLLM image family, PyTorch index."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from checks.facts import capture, gpus
from checks.facts.model import HostFacts, from_dict
from checks.matrix import engine, host, registry
from checks.reporting import recommend
from tests.conftest import FIXTURES, REAL


def _facts(driver: str | None, *ccs: str, **extra: Any) -> HostFacts:
    gpus = [
        {"index": i, "name": f"GPU {cc}", "compute_capability": cc, "brand_class": "consumer"}
        for i, cc in enumerate(ccs)
    ]
    return from_dict(HostFacts, {"driver": {"version": driver}, "gpus": gpus, **extra})


def _by_topic(facts: HostFacts) -> dict[str, recommend.Recommendation]:
    return {r.topic: r for r in recommend.recommend(facts)}


def test_llama_cpp_archs_are_only_what_the_gpus_need() -> None:
    rec = recommend.llama_cpp_flags(_facts("580.95.05", "8.6", "12.0", "8.6"))
    assert rec.value == "-DGGML_CUDA=ON -DGGML_NATIVE=OFF -DCMAKE_CUDA_ARCHITECTURES=86;120a"
    assert "table:archs" in rec.basis
    h100 = recommend.llama_cpp_flags(_facts("580.95.05", "9.0"))
    assert h100.value.endswith("=90a")
    gb10 = recommend.llama_cpp_flags(_facts("580.95.05", "12.1"))
    assert gb10.value.endswith("=121a")


@pytest.mark.parametrize(
    "looked",
    [
        {"probes": [{"name": "nvml", "status": "ok"}]},
        {"probes": [{"name": "nvidia-smi", "status": "error", "detail": "not found"}]},
        {"driver": {"smi_error": "No devices were found"}},
    ],
)
def test_no_gpu_found_means_cpu_only_everywhere(looked: dict[str, Any]) -> None:
    recs = _by_topic(from_dict(HostFacts, looked))
    assert recs["llama.cpp CMake flags"].value == "-DGGML_CUDA=OFF"
    assert recs["PyTorch wheel index"].value.endswith("/cpu")
    assert all("GPU-001" in r.basis for r in recs.values())


@pytest.mark.parametrize(
    "name",
    [
        # A driver in a WSL form's steps, no GPU named (microsoft/WSL#7056).
        "wsl_form_repro_driver_prose__wsl-7056_geforce-470.76.txt",
        # nvidia-container-cli debug lines: a driver, no GPU (NVIDIA/nvidia-container-toolkit#251).
        "nvc_info_debug_firmware_path__nct-251_460.91.03.txt",
    ],
)
def test_a_capture_that_names_no_gpu_gets_no_cpu_only_advice(name: str) -> None:
    """Nothing asked NVML or nvidia-smi: no GPU named is not no GPU, so every answer is unknown."""
    text = (FIXTURES / "corpus" / "captures" / name).read_text()
    facts = gpus.enrich(capture.parse(capture.Capture(name, text)))
    assert not facts.gpus and not host.gpus_looked_for(facts)
    assert {r.value for r in _by_topic(facts).values()} == {"unknown"}
    assert _by_topic(HostFacts())["PyTorch wheel index"].value == "unknown"


def test_nvcc_for_gb10_skips_13_0() -> None:
    rec = recommend.nvcc(_facts("580.95.05", "12.1"))
    assert rec.value == "CUDA 12.9.1", rec
    assert "LCPP-001" in rec.basis


def test_nvcc_for_sm_120_on_a_580_driver_skips_13_0() -> None:
    """nvcc 13.0 breaks llama.cpp MMQ kernels on sm_120 too (LCPP-001): 12.9.1 on a 580 driver."""
    rec = recommend.nvcc(_facts("580.105.08", "12.0"))
    assert rec.value == "CUDA 12.9.1", rec
    assert "LCPP-001" in rec.basis
    assert recommend.build_release(_facts("580.105.08", "12.0")) == "12.9.1"
    assert recommend.nvcc(_facts("580.105.08", "8.9")).value == "CUDA 13.0.2"


def test_nvcc_for_blackwell_on_a_590_driver_is_13_1() -> None:
    assert recommend.nvcc(_facts("590.48.01", "12.0")).value == "CUDA 13.1.1"
    assert recommend.nvcc(_facts("590.48.01", "12.1")).value == "CUDA 13.1.1"


def test_nvcc_for_rtx_5090_skips_13_2_before_update_2() -> None:
    rec = recommend.nvcc(_facts("595.58.03", "12.0"))
    assert rec.value == "CUDA 13.1.1", rec
    assert "LCPP-002" in rec.basis
    assert recommend.nvcc(_facts("595.71.05", "12.0")).value == "CUDA 13.2.2"


def test_nvcc_for_volta_stays_on_12() -> None:
    assert recommend.nvcc(_facts("595.71.05", "7.0")).value == "CUDA 12.9.1"


def test_nvcc_when_the_driver_is_too_old_for_any_build() -> None:
    rec = recommend.nvcc(_facts("560.35.05", "12.0"))
    assert rec.value == "CUDA 12.8"
    assert "upgrade the driver" in rec.detail


def test_nvcc_names_installed_good_toolkits() -> None:
    facts = _facts(
        "580.95.05", "8.6", toolkits=[{"path": "/usr/local/cuda-13.0", "release": "13.0"}]
    )
    assert "/usr/local/cuda-13.0" in recommend.nvcc(facts).detail


def test_vllm_family_follows_the_driver() -> None:
    assert recommend.vllm_image(_facts("580.95.05", "8.6")).value == "cu130"
    assert recommend.vllm_image(_facts("575.57.08", "8.6")).value == "cu129"
    assert recommend.vllm_image(_facts("570.133.20", "12.0")).value == "cu128"
    too_old = recommend.vllm_image(_facts("550.144.03", "8.9"))
    assert too_old.value.startswith("none")
    assert "570.26" in too_old.detail
    assert recommend.vllm_image(_facts(None, "8.9")).value == "unknown"


def test_torch_index_covers_every_gpu_within_the_driver() -> None:
    assert recommend.torch_index(_facts("580.95.05", "12.0")).value.endswith("/cu130")
    assert recommend.torch_index(_facts("570.133.20", "12.0")).value.endswith("/cu128")
    assert recommend.torch_index(_facts("580.95.05", "6.1")).value.endswith("/cu126")
    mixed = recommend.torch_index(_facts("575.57.08", "7.0", "8.9"))
    assert mixed.value.endswith("/cu129")
    assert recommend.torch_index(_facts("550.144.03", "12.0")).value == "none"


def test_unknown_compute_capability_is_reported_as_unknown() -> None:
    facts = from_dict(HostFacts, {"gpus": [{"index": 0, "name": "Mystery GPU"}]})
    recs = _by_topic(facts)
    assert recs["llama.cpp CMake flags"].value == "unknown"
    assert recs["PyTorch wheel index"].value == "unknown"


def test_installed_toolkit_judged_by_its_update() -> None:
    """13.2.2 is fixed for sm_120; a 13.2 of unknown update is not trusted there; Ampere is fine."""
    fixed = {"path": "/usr/local/cuda-13.2", "release": "13.2", "update": "13.2.2"}
    unknown = {"path": "/opt/cuda-13.2", "release": "13.2"}
    rtx5090 = _facts("595.71.05", "12.0", toolkits=[fixed, unknown])
    detail = recommend.nvcc(rtx5090).detail
    assert "/usr/local/cuda-13.2" in detail and "/opt/cuda-13.2" not in detail
    ampere = _facts("595.71.05", "8.6", toolkits=[unknown])
    assert "/opt/cuda-13.2" in recommend.nvcc(ampere).detail


NVCC_13 = {"path": "/usr/local/cuda-13.0/bin/nvcc", "release": "13.0", "version": "13.0.88"}


def test_nvcc_13_on_a_575_driver_is_not_called_good() -> None:
    """DRV-001 reports nvcc 13.0 on driver 575.x (CUDA 13 needs 580.65.06): so does the advice."""
    facts = _facts("575.57.08", "8.9", toolkits=[NVCC_13])
    drv_001 = [f for f in engine.evaluate(facts) if f.rule == "DRV-001"]
    assert [(f.severity, f.subject) for f in drv_001] == [
        ("error", f"CUDA toolkit {NVCC_13['path']}")
    ]
    assert recommend.good_toolkits(facts) == []
    rec = recommend.nvcc(facts)
    assert rec.value == "CUDA 12.9.1", rec
    assert "installed and good" not in rec.detail and "DRV-001" in rec.basis
    assert recommend.build_release(facts) == "12.9.1"
    newer = _facts("580.95.05", "8.9", toolkits=[NVCC_13])
    assert [t.path for t in recommend.good_toolkits(newer)] == [NVCC_13["path"]]
    assert f"installed and good: CUDA toolkit {NVCC_13['path']}" in recommend.nvcc(newer).detail


def test_nvcc_builds_for_the_driver_of_a_compressed_kernel() -> None:
    """Below 550, ggml's compressed kernels of CUDA 12.8+ do not load (LCPP-005): not good."""
    nvcc_128 = {"path": "/usr/local/cuda-12.8/bin/nvcc", "release": "12.8", "version": "12.8.93"}
    facts = _facts("535.183.01", "8.6", toolkits=[nvcc_128])
    assert "LCPP-005" in {f.rule for f in engine.evaluate(facts)}
    assert recommend.good_toolkits(facts) == []
    assert recommend.nvcc(facts).value == "CUDA 12.2.2"


def test_no_release_good_on_the_driver_is_never_installed() -> None:
    """Driver 418 runs no CUDA family an RTX 3090 builds with: advice, but nothing to install."""
    facts = _facts("418.87.01", "8.6")
    rec = recommend.nvcc(facts)
    assert rec.value == "CUDA 11.1" and "upgrade the driver first" in rec.detail
    assert recommend.build_release(facts).startswith("none good on this host as it is: CUDA 11.1")


def _load(name: str) -> HostFacts:
    return from_dict(HostFacts, json.loads((FIXTURES / f"{name}.json").read_text())["facts"])


@pytest.mark.parametrize(
    ("facts", "rule"),
    [
        (capture.load([str(REAL / "err_nvml-mismatch__tinygrad-ogkm-47.txt")]), "DRV-003"),
        (_load("rules/DRV-003/fail"), "DRV-003"),
        (_load("rules/DRV-007/fail"), "DRV-007"),
        (_load("rules/DRV-007/fail-no-devices"), "DRV-007"),
        (_load("rules/HOST-001/fail-unreachable"), "HOST-001"),
    ],
    ids=["nvml-mismatch-capture", "DRV-003", "DRV-007", "DRV-007-no-devices", "HOST-001"],
)
def test_a_broken_driver_is_reported_as_broken_never_as_no_gpu(facts: HostFacts, rule: str) -> None:
    recs = _by_topic(facts)
    assert len(recs) == 4
    for rec in recs.values():
        assert rec.value == "unknown until the driver works", rec
        assert rec.basis == (rule,)
        assert rec.detail.startswith(f"the NVIDIA driver is broken ({rule}: "), rec.detail
        assert "CPU" not in rec.detail and "no NVIDIA GPU" not in rec.detail
    findings = {f.rule for f in engine.evaluate(facts)}
    assert rule in findings and "GPU-001" not in findings
    assert recommend.build_release(facts).startswith("unknown until the driver works")


def test_without_any_driver_the_host_is_cpu_only() -> None:
    """Nothing NVIDIA answers and nothing shows a GPU: GPU-001, and CPU-only advice."""
    facts = _load("rules/GPU-001/fail")
    assert recommend.broken_driver(facts) is None
    assert recommend.llama_cpp_flags(facts).value == "-DGGML_CUDA=OFF"


# --- Jetson: the L4T release decides (tables/jetson.toml) --------------------------------------

CAPTURES = FIXTURES / "corpus" / "captures"
FLAGS, NVCC, VLLM, TORCH = (
    "llama.cpp CMake flags",
    "CUDA toolkit (nvcc) for building",
    "vLLM image family",
    "PyTorch wheel index",
)
JP5_TORCH = "https://developer.download.nvidia.com/compute/redist/jp/"
JP6_TORCH = "https://pypi.jetson-ai-lab.io/jp6/cu126"
JP6_VLLM = "ghcr.io/nvidia-ai-iot/vllm:latest-jetson-orin"
JP4_TORCH = "https://forums.developer.nvidia.com/t/pytorch-for-jetson/72048"


def _capture(name: str) -> HostFacts:
    return gpus.enrich(capture.load([str(CAPTURES / name)]))


# capture: (llama.cpp flags or None for unknown, nvcc, PyTorch, vLLM)
JETSONS = {
    "jtop_board_form__jetson-stats-405_orin-nano-35.3.1.txt": (
        "87",
        "CUDA 11.4",
        JP5_TORCH,
        "none published for JetPack 5",
    ),
    "jetson_release_custom_model__tier4-hdr-29_xavier-nx-35.5.0.txt": (
        "72",
        "CUDA 11.4",
        JP5_TORCH,
        "none published for JetPack 5",
    ),
    "jtop_hw_missing__jetson-stats-476_agx-orin-36.2.0.txt": (
        "87",
        "CUDA 12.2",
        "https://developer.download.nvidia.com/compute/redist/jp/v60dp/pytorch/",
        "none published for L4T r36.2",
    ),
    "jetson_release_missing__jetson-stats-603_orin-nx-36.4.3.txt": (
        "87",
        "CUDA 12.6",
        JP6_TORCH,
        JP6_VLLM,
    ),
    "jtop_board_form_raw__jetson-stats-677_agx-orin-36.4.4.txt": (
        "87",
        "CUDA 12.6",
        JP6_TORCH,
        JP6_VLLM,
    ),
    "nv_tegra_release_r36__jetson-stats-791_orin-nano-36.4.7.txt": (
        None,
        "CUDA 12.6",
        JP6_TORCH,
        JP6_VLLM,
    ),
    "jtop_l4t_form_missing__jetson-stats-801_l4t-36.5.0.txt": (
        None,
        "CUDA 12.6",
        JP6_TORCH,
        JP6_VLLM,
    ),
    "jetson_stats_raw_tegra-release__jetson-stats-711_agx-thor-r38.txt": (
        "110a",
        "CUDA 13.0",
        "https://download.pytorch.org/whl/cu130",
        "vllm/vllm-openai:<version> (v0.20.0 or newer)",
    ),
    "jetsoninfo__jetsonutilities-8_tx2-32.4.2.txt": (None, "CUDA 10.2", JP4_TORCH, "none"),
    "nv_tegra_release_prompt_r32__arducam-mipi-108_xavier-nx-32.5.1.txt": (
        None,
        "CUDA 10.2",
        JP4_TORCH,
        "none",
    ),
    "pr_test_env_jetpack_arch__ethminer-pr2171_xavier-32.4.4.txt": (
        None,
        "CUDA 10.2",
        JP4_TORCH,
        "none",
    ),
    "jetsoninfo_before_after__jetsonutilities-pr3_tx1-28.2.0.txt": (
        None,
        "CUDA 9.0",
        "none published",
        "none",
    ),
}

# Jetsons whose L4T release the capture does not show (nvidia-smi, deviceQuery, collect_env, ...).
JETSONS_WITHOUT_L4T = [
    "nvsmi_L_table_orin_nvgpu__jetpack-nixos-pr371_orin-540.4.0.txt",
    "nvsmi_jp5_missing_jp6_table__ultralytics-pr20680_orin-nvgpu-540.4.0.txt",
    "prose_numbered_env_jetson__nvitop-168_orin-nano-540.4.0.txt",
    "nvcc_tegra_cmake__llamacpp-14558_jetson-orin-12.6.txt",
    "devicequery__pocl-pr890_jetson-nano-tegra-x1.txt",
    "devicequery_compat_orin__meta-tegra-pr2088_agx-orin-12.9.txt",
    "vllm_collectenv_new__vllm-34470_jetson-thor-580.00.txt",
    "vulkaninfo_full_tegra__jetson-stats-509_tegra-x1.txt",
    "nvcli_info_jetson_null__nvidia-docker-1775_xavier-r32.txt",
]
ALL_JETSONS = [*JETSONS, *JETSONS_WITHOUT_L4T]

# What a desktop reading of a Jetson said: driver minimums, desktop indexes and images.
DESKTOP_DRIVER_RULES = {"DRV-001", "DRV-002", "DRV-004", "DRV-005", "CTR-001", "CTR-002"}


@pytest.mark.parametrize("name", list(JETSONS))
def test_a_jetson_gets_what_its_l4t_release_ships(name: str) -> None:
    flags, cuda, torch, vllm = JETSONS[name]
    facts = _capture(name)
    assert host.is_jetson(facts)
    recs = _by_topic(facts)
    if flags is None:  # the module is not named: its GPU is there, its capability unknown
        assert recs[FLAGS].value == "unknown" and "not named" in recs[FLAGS].detail
        assert recommend.cuda_architectures(facts) is None
    else:
        assert recs[FLAGS].value.endswith(f"-DCMAKE_CUDA_ARCHITECTURES={flags}")
    assert (recs[NVCC].value, recs[TORCH].value, recs[VLLM].value) == (cuda, torch, vllm)
    assert recs[NVCC].detail.startswith(f"the CUDA of L4T {facts.system.l4t_release}")
    assert "comes with JetPack" in recs[NVCC].detail
    for topic in (NVCC, TORCH, VLLM):
        assert recs[topic].basis == ("table:jetson",)
    assert recommend.build_release(facts).startswith(f"none to install on a Jetson: {cuda} (")


@pytest.mark.parametrize("name", JETSONS_WITHOUT_L4T)
def test_a_jetson_without_its_l4t_release_is_unknown(name: str) -> None:
    facts = _capture(name)
    assert host.is_jetson(facts) and facts.system.l4t_release is None
    recs = _by_topic(facts)
    for topic in (NVCC, TORCH, VLLM):
        assert recs[topic].value == "unknown", recs[topic]
        assert recs[topic].detail.startswith("L4T release not read"), recs[topic]
    assert recommend.build_release(facts).startswith("unknown (L4T release not read")


def test_the_driver_reported_cuda_is_said_but_not_taken_for_the_jetpacks() -> None:
    """nvidia-smi on a JetPack 6 Orin: 540.4.0, CUDA 12.6; the L4T release is not in the paste."""
    facts = _capture("nvsmi_jp5_missing_jp6_table__ultralytics-pr20680_orin-nvgpu-540.4.0.txt")
    rec = recommend.nvcc(facts)
    assert rec.value == "unknown" and "(the driver reports CUDA 12.6)" in rec.detail


def test_a_jetsons_installed_nvcc_is_named() -> None:
    rec = recommend.nvcc(_capture("nvcc_tegra_cmake__llamacpp-14558_jetson-orin-12.6.txt"))
    assert rec.value == "unknown" and "installed and good: CUDA toolkit 12.6" in rec.detail


@pytest.mark.parametrize("name", ALL_JETSONS)
def test_a_jetson_never_gets_desktop_advice(name: str) -> None:
    """No desktop driver upgrade, no driver minimum, and before JetPack 7 no download.pytorch.org
    index or upstream vLLM image."""
    facts = _capture(name)
    findings = engine.evaluate(facts, route="host")
    assert not DESKTOP_DRIVER_RULES & {f.rule for f in findings}, findings
    assert not {"ARCH-001", "ARCH-003"} & {f.rule for f in findings}, findings
    texts = [t for r in recommend.recommend(facts) for t in (r.value, r.detail)]
    assert not any("upgrade the driver" in t or "driver 5" in t for t in texts), texts
    if not (facts.system.l4t_release or "").startswith(("38.", "39.")):
        values = [r.value for r in recommend.recommend(facts)]
        assert not any("download.pytorch.org" in v or "vllm/vllm-openai" in v for v in values)


def test_jetson_thor_draws_no_desktop_driver_finding() -> None:
    """vllm#34470: Jetson Thor reports driver 580.00 with CUDA 13.0 and torch 2.10.0+cu130; read
    as a desktop driver it was older than 580.65.06 (DRV-001, DRV-004), and the x86_64 wheel table
    said the aarch64 cu130 wheel lacks sm_110 (ARCH-003)."""
    facts = _capture("vllm_collectenv_new__vllm-34470_jetson-thor-580.00.txt")
    assert facts.driver.version == "580.00" and host.host_driver(facts) is None
    assert engine.evaluate(facts, route="host") == []


@pytest.mark.parametrize(
    ("name", "torch"),
    [
        ("nvsmi_table_gb10_prompt__llamacpp-22561_580.142-not-supported.txt", "/cu130"),
        ("ollama_env_laptop_igpu_dropped__ollama-17222_rtx3050-laptop-592.27.txt", "/cu130"),
    ],
)
def test_a_desktop_or_a_gb10_is_no_jetson(name: str, torch: str) -> None:
    """GB10 (DGX Spark) is "embedded" in the GPU catalogue, but runs DGX OS and a desktop driver."""
    facts = _capture(name)
    assert not host.is_jetson(facts) and host.host_driver(facts) is not None
    recs = _by_topic(facts)
    assert recs[TORCH].value.startswith("https://download.pytorch.org/whl/")
    assert recs[TORCH].value.endswith(torch)
    assert "table:jetson" not in {b for r in recs.values() for b in r.basis}


def test_the_rtx_3050_capture_keeps_its_desktop_recommendations() -> None:
    recs = _by_topic(
        _capture("ollama_env_laptop_igpu_dropped__ollama-17222_rtx3050-laptop-592.27.txt")
    )
    assert recs[NVCC].value == "CUDA 13.1.1"
    assert recs[VLLM].value == "cu130"
    assert recs[FLAGS].value.endswith("=86")


def test_an_l4t_release_beside_a_discrete_gpu_is_no_jetson() -> None:
    facts = _facts("580.95.05", "8.6", system={"l4t_release": "36.4.3"})
    assert not host.is_jetson(facts)
    assert recommend.nvcc(facts).value.startswith("CUDA 13")


def test_a_jetpack_name_alone_finds_its_release() -> None:
    facts = from_dict(HostFacts, {"system": {"jetpack_release": "6.2"}})
    recs = _by_topic(facts)
    assert recs[NVCC].value == "CUDA 12.6" and recs[NVCC].detail.startswith(
        "the CUDA of JetPack 6.2"
    )
    assert recs[TORCH].value == JP6_TORCH


@pytest.mark.parametrize(
    ("system", "why"),
    [
        ({"l4t_release": "31.1.0"}, "L4T 31.1.0 is not in the Jetson table"),
        ({"l4t_release": "38.5.0"}, "L4T 38.5.0 is not in the Jetson table"),
        ({"jetpack_release": "6.0 EA"}, "JetPack 6.0 EA is not in the Jetson table"),
    ],
)
def test_a_release_the_table_lacks_stays_unknown(system: dict[str, str], why: str) -> None:
    recs = _by_topic(from_dict(HostFacts, {"system": system}))
    for topic in (NVCC, TORCH, VLLM):
        assert recs[topic].value == "unknown" and recs[topic].detail.startswith(why)


@pytest.mark.parametrize(
    ("l4t", "cuda"),
    [("32.7.1", "10.2"), ("34.1.1", "11.4"), ("35.6.0", "11.4"), ("36.3.0", "12.2")],
)
def test_l4t_releases_read_by_major_or_major_minor(l4t: str, cuda: str) -> None:
    row = registry.jetson_release(l4t, None)
    assert row is not None and row["cuda"] == cuda
    assert registry.jetson_release("36.45.0", None) is None


def test_the_jetson_table_is_consistent() -> None:
    data = registry.table("jetson")
    entries = [e for r in data["release"] for e in r["l4t"]]
    jetpacks = [j for r in data["release"] for j in r["jetpack"]]
    assert len(entries) == len(set(entries)) and len(jetpacks) == len(set(jetpacks))
    for row in data["release"]:
        assert row["family"] in data["family"] and row["sources"], row
        assert all(re.fullmatch(r"\d{2}(\.\d)?", e) for e in row["l4t"]), row
    for family in data["family"].values():
        for key in ("name", "torch", "torch_note", "vllm", "vllm_note", "cuda_note", "sources"):
            assert family[key], (family["name"], key)


@pytest.mark.parametrize(
    ("name", "jetson"),
    [
        ("NVIDIA Jetson Orin Nano (Developer kit)", True),
        ("Orin (nvgpu)", True),
        ("Orin", True),
        ("NVIDIA Tegra X1", True),
        ("NVIDIA Thor", True),
        ("Xavier", True),
        ("NVIDIA GB10", False),
        ("NVIDIA GeForce RTX 3050 Laptop GPU", False),
        (None, False),
    ],
)
def test_jetson_gpu_names(name: str | None, jetson: bool) -> None:
    assert registry.jetson_integrated(name) is jetson
