"""The shapes capture set 9 missed, read now, and the near misses beside them that must stay
unread: a lone GPU line the catalogue knows, the driver's CUDA in parentheses after the driver,
issue-form headings, xFormers' info and dispatch reports, Unsloth's banner, and a driver named
in a sentence."""

from __future__ import annotations

import pytest

from checks.facts.parsers import driver_prose, env_list, unsloth, xformers


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("OS: Ubuntu 24.10\nCPU: AMD Ryzen 7 9800X3D\nGPU: RTX 5090\n", "RTX 5090"),
        ("## Environment\n\n- GPU: RTX 5070 Ti (SM 12.0)\n- CUDA: 12.8 and 12.9\n", "RTX 5070 Ti"),
        ("- **Graphics card**: NVIDIA GeForce RTX 3090\n", "NVIDIA GeForce RTX 3090"),
    ],
)
def test_a_lone_gpu_line_naming_a_catalogue_gpu_is_read(text: str, name: str) -> None:
    assert env_list.detect_env_list(text)
    facts = env_list.parse_env_list(text)
    assert [g.name for g in facts.gpus] == [name]
    assert facts.driver.cuda_version is None  # a bare "CUDA:" is a toolkit


@pytest.mark.parametrize(
    "text",
    [
        "GPU: RTX 4090 or better\n",  # a requirement
        "- GPU: minimum RTX 3060\n",
        "GPU: NVIDIA GPU with 24GB+\n",  # not a model
        "GPU: any NVIDIA RTX\n",
        "GPU: 0\n",
        "GPU: cuda:0\n",
        "Device: RTX 5090\n",  # a key that may name anything does not stand alone
        "Hardware: RTX 5090\n",
        "Driver: 570.124.06\n",  # lone lines with other keys stay unread
        "CUDA Version: 12.8\n",
        "GPU: RTX 590 Laptop GPU\n",  # not a name the catalogue knows
        "- GPU Model: [e.g. GTX 1070] 1080 Ti\n",
    ],
)
def test_lone_lines_that_are_no_gpu_of_the_host_stay_unread(text: str) -> None:
    assert not env_list.detect_env_list(text)


def test_the_cuda_in_parentheses_right_after_the_driver_is_the_drivers() -> None:
    text = "- GPU: NVIDIA GeForce RTX 5070 Ti Laptop GPU\n- Driver: 595.79 (CUDA 13.2)\n"
    facts = env_list.parse_env_list(text)
    assert (facts.driver.version, facts.driver.cuda_version) == ("595.79", "13.2")


@pytest.mark.parametrize(
    "line",
    [
        "- Driver: 595.79, CUDA 13.2",  # not in parentheses right after the driver
        "- Driver: 595.79 (CUDA 13.2",  # not closed
        "- Driver: 595.79 (needs CUDA 13.2)",
        "- Driver: 595.79 (CUDA 13.2 or later)",
        "- Driver: 595.79 (CUDA toolkit 12.8)",
    ],
)
def test_other_cuda_versions_near_the_driver_stay_unread(line: str) -> None:
    facts = env_list.parse_env_list("- GPU: NVIDIA GeForce RTX 5070 Ti\n" + line + "\n")
    assert facts.driver.version == "595.79"
    assert facts.driver.cuda_version is None


FORM = (
    "### GPU vendor\n\nNvidia (CUDA)\n\n### GPU model\n\nRTX 2080 Ti\n\n"
    "### GPU VRAM\n\n11GB\n\n### NVIDIA driver version\n\n570.124.06\n\n### Version number\n\n6.1\n"
)


def test_issue_form_headings_are_read() -> None:
    facts = env_list.parse_env_list(FORM)
    assert [g.name for g in facts.gpus] == ["RTX 2080 Ti"]
    assert facts.driver.version == "570.124.06"
    assert facts.driver.cuda_version is None


@pytest.mark.parametrize(
    "text",
    [
        "### GPU model\n\n_No response_\n\n### NVIDIA driver version\n\n_No response_\n",
        "### GPU model\n\nR9700 AI Pro\n",  # not NVIDIA
        "### GPU model\n\nRTX 4090 or better\n",
        "### GPU\n\ncuda\n",
        "### Driver version\n\nlatest\n",
        "### NVIDIA driver version\n\n570\n",  # a branch, not a version
        "### NVIDIA driver version\n\n```text\n570.124.06\n```\n",  # not its own paragraph
        "### GPU model\nRTX 2080 Ti\n",  # no blank line: not a form's rendering
        "### CUDA version\n\n12.8\n",  # a form's CUDA may be the toolkit's
        "### Steps\n\nGPU: 0\n",
    ],
)
def test_headings_without_a_valid_answer_stay_unread(text: str) -> None:
    assert not env_list.detect_env_list(text)


def test_a_heading_gpu_and_a_list_gpu_are_one_gpu() -> None:
    text = (
        "### GPU model\n\nRTX 2080 Ti\n\n- GPU: NVIDIA GeForce RTX 2080 Ti\n- Driver: 570.124.06\n"
    )
    facts = env_list.parse_env_list(text)
    assert [g.name for g in facts.gpus] == ["NVIDIA GeForce RTX 2080 Ti"]


INFO = (
    "xFormers 0.0.35+42fc265.d20260623\n"
    "pytorch.version:                                   2.12.1+cu130\n"
    "pytorch.cuda:                                      available\n"
    "gpu.compute_capability:                            12.0\n"
    "gpu.name:                                          NVIDIA GeForce RTX 5070\n"
)


def test_xformers_info_names_the_gpu_and_its_capability() -> None:
    facts = xformers.parse_xformers(INFO)
    assert [(g.name, g.compute_capability) for g in facts.gpus] == [
        ("NVIDIA GeForce RTX 5070", "12.0")
    ]
    assert facts.driver.cuda_version is None


@pytest.mark.parametrize(
    "text",
    [
        "pytorch.cuda:                                      not available\n",
        "build.cuda_version:                                1107\n",  # a toolkit
        "gpu.name: NVIDIA GeForce RTX 5070\n",  # not xformers.info's report
    ],
)
def test_xformers_info_without_a_device_stays_unread(text: str) -> None:
    assert not xformers.detect_xformers(text)


DISPATCH = (
    "`fa3F@2.8.3-133-gde1584b` is not supported because:\n"
    "    requires device with capability < (8, 0) but your GPU has capability (12, 0) (too new)\n"
)


def test_the_dispatch_capability_is_one_nameless_gpu() -> None:
    facts = xformers.parse_xformers(DISPATCH)
    assert [(g.name, g.compute_capability) for g in facts.gpus] == [(None, "12.0")]


@pytest.mark.parametrize(
    "text",
    [
        # a GPU named elsewhere: a nameless copy would count it twice
        DISPATCH + "NVIDIA GeForce RTX 5070 with CUDA capability sm_120 is not compatible\n",
        DISPATCH + "My GPU is Tesla P40\n",
        DISPATCH + "Tested on an A100\n",
        # two capabilities: two devices, which is which unknown
        DISPATCH + "    requires device with capability > (8, 0) but your GPU has capability "
        "(7, 5) (too old)\n",
        # the requirement alone names no device of the host
        "requires device with capability >= (8, 0)\n",
    ],
)
def test_dispatch_capabilities_that_may_not_be_the_hosts_stay_unread(text: str) -> None:
    assert not xformers.parse_xformers(text).gpus


BANNER = (
    "==((====))==  Unsloth 2025.3.19: Fast Qwen2 patching. Transformers: 4.50.3.\n"
    "   \\\\   /|    NVIDIA GeForce RTX 5090. Num GPUs = 1. Max memory: 31.367 GB. "
    "Platform: Linux.\n"
    "O^O/ \\_/ \\    Torch: 2.8.0+cu128. CUDA: 12.0. CUDA Toolkit: 12.8. Triton: 3.3.0\n"
)


def test_the_unsloth_banner_cuda_is_the_compute_capability() -> None:
    facts = unsloth.parse_unsloth(BANNER)
    assert [(g.name, g.compute_capability) for g in facts.gpus] == [
        ("NVIDIA GeForce RTX 5090", "12.0")
    ]
    assert facts.driver.cuda_version is None
    assert facts.driver.version is None


@pytest.mark.parametrize(
    "text",
    [
        BANNER.replace("Num GPUs = 1", "Num GPUs = 2"),  # device 0 of several
        "==((====))==  Unsloth - 2x faster free finetuning | Num GPUs = 1\n"
        "   \\\\   /|    Num examples = 44 | Num Epochs = 12\n",  # the training banner
        "GPU: NVIDIA GeForce RTX 5090. Max memory: a lot\n",
    ],
)
def test_banners_that_name_no_single_gpu_stay_unread(text: str) -> None:
    assert not unsloth.detect_unsloth(text)


@pytest.mark.parametrize(
    ("text", "driver"),
    [
        ("Running cuda-toolkit-12.8, driver 570.124.04, open.\n", "570.124.04"),
        ("- Debian 12 x86_64\n- NVIDIA drivers 570.144\n- Geforce RTX 5060 Ti\n", "570.144"),
        ("card1 is a Quadro P4000\nnVidia v550.142\nCUDA 12.4\n", "550.142"),
        # a lone key line, the list's one fact (nanopool/ewbf-miner#7, Syllo/nvtop#186)
        ("Driver Version: 570.124.06\n", "570.124.06"),
        ("Nvidia Driver: 381.22 (Ubuntu 16)\nCUDA Version: 8.0.61\n", "381.22"),
        ("Nvdia driver version- 525.60.11\nOs- Pop! OS 22.04 LTS x86_64\n", "525.60.11"),
    ],
)
def test_a_driver_named_in_a_sentence_is_read(text: str, driver: str) -> None:
    assert driver_prose.parse_driver_prose(text).driver.version == driver


@pytest.mark.parametrize(
    "text",
    [
        "This release requires NVIDIA driver 570.86 or later.\n",
        "Minimum driver 525.60.13 for CUDA 12.\n",
        "Use driver 535.104.05 or newer.\n",
        "Needs at least driver 550.54.\n",
        "I upgraded to driver 570.124.06 and it broke.\n",
        "Install NVIDIA driver 570.133.07 first.\n",
        "Went from driver 550.54 to driver 570.86.\n",  # two versions
        "Use driver 570.86 instead of 550.54.\n",
        "driver 570.124.06\n| NVIDIA-SMI 550.54.15    Driver Version: 550.54.15 |\n",  # two
        "driver 570.124.06 took 345.67 s\n",  # another driver-shaped number
        "nvidia-driver-570 installed\n",  # a package, no version
        "NVIDIA-SMI 570.124.06\n",  # nvidia-smi's own, its parser's
        "Minimum driver version: 570.124.06\n",
        "Driver: 570.86 or later\n",
        "Driver Version                            : 570.124.06\n",  # nvidia-smi -q's, its own
        "nvidia-driver-570.86-1.el9.x86_64\n",  # a package file
        "libnvidia 570.124.06\n",
        "driver 5701.24\n",
        "driver 57.124\n",
        "Support for driver 580.65 was fixed in #123.\n",
    ],
)
def test_drivers_in_sentences_that_may_not_be_the_hosts_stay_unread(text: str) -> None:
    assert driver_prose.parse_driver_prose(text).driver.version is None


def test_a_lone_gpu_line_reads_no_other_line_of_a_list_of_one_fact() -> None:
    facts = env_list.parse_env_list("GPU: RTX 5090\nDevice: NVIDIA-Nemotron-Nano-9B\n")
    assert [g.name for g in facts.gpus] == ["RTX 5090"]
