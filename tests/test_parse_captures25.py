"""The shapes capture set 25 missed, read now, and the near misses beside them that must stay
unread: a driver written as its package's name, a card's name alone on a form's line, the head
of `nvidia-smi -q` alone, OptiX's library in nvidia-container-cli's debug log, MinerU's logged
capability, and a Jetson that "is running" its JetPack with its L4T release in brackets."""

from __future__ import annotations

import pytest

from checks.facts.parsers import (
    containers,
    env_list,
    form_gpu_line,
    jetson_prose,
    mineru,
    nvidia_smi,
)
from tests.conftest import FIXTURES

CAPTURES = FIXTURES / "corpus" / "captures"


def _capture(name: str) -> str:
    return (CAPTURES / name).read_text()


# NVIDIA/open-gpu-kernel-modules#1001 (description by kitaekatt, 2026-01-13), cut to its bullets.
BULLETS = (
    "- **GPU**: NVIDIA GeForce RTX 5090 (Blackwell, 32GB VRAM)\n"
    "- **Driver**: nvidia-driver-580.105.08 (previously nvidia-driver-570-open)\n"
    "- **OS**: Ubuntu 24.04 LTS\n"
    "- **Kernel**: 6.8.0-87-generic\n"
    "- **CUDA**: 13.0\n"
    "- **PyTorch**: 2.9.1+cu130 (also tested cu128)\n"
)


def test_a_package_named_driver_is_read_and_a_bare_cuda_key_is_not() -> None:
    facts = env_list.parse_env_list(BULLETS)
    assert (facts.driver.version, facts.driver.cuda_version) == ("580.105.08", None)


def test_a_package_name_without_a_version_is_no_driver() -> None:
    text = "- GPU: NVIDIA GeForce RTX 5090\n- Driver: nvidia-driver-570-open\n"
    assert env_list.parse_env_list(text).driver.version is None


@pytest.mark.parametrize(
    ("name", "gpu"),
    [
        (
            "lmstudio_form_gpu_line_runtime_title__lmstudio-1131_rtx-pro-6000.txt",
            "RTX Blackwell Pro 6000",
        ),
        (
            "wsl_form_other_software_prose__wsl-9821_rtx3080ti-528.49.txt",
            "NVIDIA GeForce RTX 3080 Ti",
        ),
    ],
)
def test_a_cards_name_alone_on_a_forms_line_is_read(name: str, gpu: str) -> None:
    text = _capture(name)
    assert form_gpu_line.detect_form_gpu_line(text)
    assert [g.name for g in form_gpu_line.parse_form_gpu_line(text).gpus] == [gpu]


@pytest.mark.parametrize(
    "text",
    [
        "GPU\nRTX 4090 or better\n",  # a requirement, not a name alone
        "GPU\n\nRTX 3090\n",  # not the very next line
        "GPU\nRTX 5000\n",  # not a name the catalogue knows as one board
        "GPU\nNVIDIA GeForce RTX 3080 Ti, RTX 4090\n",  # two cards on a line
        "### Expected Behavior\n\nNVIDIA GeForce RTX 3080 Ti\n",  # not a section about the machine
        "### Other Software\n\nNVIDIA GeForce RTX 3080 Ti\nNVIDIA GeForce RTX 4090\n",  # two models
        "### Other Software\n\nWindows 11, WSL2, Ubuntu 22.04, CUDA 12.1, cuDNN 8.8\n",
        "CPU\nRTX 3090\n",  # another label
    ],
)
def test_lines_that_are_no_cards_name_alone_under_a_gpu_label_stay_unread(text: str) -> None:
    assert not form_gpu_line.detect_form_gpu_line(text)


def test_the_head_of_nvidia_smi_q_alone_gives_the_driver() -> None:
    text = _capture("nvsmi_a_header_in_form__nvidia-docker-578_384.98.txt")
    facts = nvidia_smi.parse_query_head(text)
    assert (facts.driver.version, facts.driver.cuda_version) == ("384.98", None)


@pytest.mark.parametrize(
    "text",
    [
        "Driver Version                      : 384.98\n",  # no timestamp above it
        "Timestamp: Sun Dec 17 14:56:13 2017\nDriver Version: 384.98\n",  # not -q's padding
        "Timestamp                           : Sun Dec 17 14:56:13 2017\n\n"
        "Driver Version                      : 384.98\n",  # not right below it
        "Timestamp                           : 2017-12-17\n"
        "Driver Version                      : 384.98\n",  # not ctime's date
    ],
)
def test_lines_that_are_not_the_head_of_nvidia_smi_q_stay_unread(text: str) -> None:
    assert nvidia_smi.parse_query_head(text).driver.version is None


# NVIDIA/nvidia-docker#1711 (description by Dan-Burns, 2022-12-02), cut after its first library.
NVC_1711 = (
    "I1202 15:15:34.438005 26518 nvc_info.c:766] requesting driver information with ''\n"
    "I1202 15:15:34.445181 26518 nvc_info.c:173] selecting "
    "/usr/lib/x86_64-linux-gnu/libnvoptix.so.520.56.06\n"
)


@pytest.mark.parametrize(
    ("text", "driver"),
    [
        (NVC_1711, "520.56.06"),
        (_capture("nvc_info_debug_libs_only__nvidia-docker-1717_525.85.12.txt"), "525.85.12"),
    ],
)
def test_optix_selected_by_nvidia_container_cli_gives_the_driver(text: str, driver: str) -> None:
    assert containers.detect_container_cli_debug(text)
    assert containers.parse_container_cli_debug(text).driver.version == driver


@pytest.mark.parametrize(
    "path",
    [
        "/usr/lib/x86_64-linux-gnu/libnvoptix.so.1",  # the soname link, no version
        "/usr/local/lib/libnvoptix_loader.so.520.56.06",  # not OptiX's own name
    ],
)
def test_other_optix_names_give_no_driver(path: str) -> None:
    text = f"I1202 15:15:34.445181 26518 nvc_info.c:173] selecting {path}\n"
    assert not containers.detect_container_cli_debug(text)


def test_minerus_logged_capability_is_one_unnamed_gpu() -> None:
    text = _capture("mineru_log_compute_cap_only__vllm-32575_cc12.1.txt")
    facts = mineru.parse_mineru(text)
    assert [(g.name, g.compute_capability) for g in facts.gpus] == [(None, "12.1")]


@pytest.mark.parametrize(
    "line",
    [
        # An Ascend NPU: MinerU logs a made-up 8.0 in the same words.
        "compute_capability: 8.0 >= 8.0 and vllm version: 0.10.1 >= 0.10.1, enable ...",
        "compute_capability: 12.1",  # no MinerU words
        "min compute_capability: 8.0 required",
    ],
)
def test_other_capability_lines_stay_unread(line: str) -> None:
    assert not mineru.detect_mineru(line + "\n")


def test_a_jetson_that_is_running_its_jetpack_gives_its_l4t_release() -> None:
    text = _capture("ollama_log_jetson_prose_l4t__ollama-1979_orin-nano-35.4.1.txt")
    facts = jetson_prose.parse_jetson_prose(text)
    assert [g.name for g in facts.gpus] == ["Orin Nano"]
    assert (facts.system.jetpack_release, facts.system.l4t_release) == ("5.1.2", "35.4.1")


@pytest.mark.parametrize(
    "text",
    [
        "The Orin Nano should be running Jetpack 5.1.2 (r35.4.1 L4T).\n",  # not "is running"
        "The Orin Nano is running Ubuntu 20.04 and will be upgraded to Jetpack 6.0.\n",
        "The Orin Nano was running Jetpack 5.1.2.\n",  # the past
        "The Orin Nano is running Jetpack 5.1.2 (r35.4.1 L4T). The Orin Nano is running "
        "Jetpack 5.1.2 (r35.3.1 L4T).\n",  # two L4T releases
    ],
)
def test_other_jetson_sentences_give_no_l4t_release(text: str) -> None:
    assert jetson_prose.parse_jetson_prose(text).system.l4t_release is None
