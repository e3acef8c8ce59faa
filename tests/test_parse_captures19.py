"""The shapes capture set 19 read: PyTorch's old template bullet naming the GPU after "NVIDIA"
("NVIDIA 940MX"), open-gpu-kernel-modules' "### Hardware: GPU" form field answered in the
writer's words, and a GPU's name alone on the line after a retyped nvidia-smi header; and the near
misses that must stay unread."""

from __future__ import annotations

import pytest

from checks.facts import gpus
from checks.facts.parsers import collect_env, env_list, nvidia_smi
from tests.support.captures import gpu_names, read_capture

# --- the catalogue --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "cc", "klass"),
    [
        ("NVIDIA 940MX", "5.0", "consumer"),
        ("NVIDIA GeForce 940MX", "5.0", "consumer"),
        ("Nvidia GeForce 940 MX", "5.0", "consumer"),  # alievk/avatarify-python#412
        ("GeForce 930MX", "5.0", "consumer"),  # fireice-uk/xmr-stak#462
        ("Nvidia pro 6000 blackwell max-q workstation", "12.0", "workstation"),
        ("NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", "12.0", "workstation"),
        ("PRO 6000 Blackwell Server Edition", "12.0", "datacenter"),
    ],
)
def test_catalogue_names(name: str, cc: str, klass: str) -> None:
    model = gpus.lookup(name)
    assert model is not None
    assert (model.compute_capability, model.brand_class) == (cc, klass)


@pytest.mark.parametrize("name", ["Radeon Pro 6000", "GeForce MX940", "model 1940MX", "PRO 6000"])
def test_catalogue_near_misses(name: str) -> None:
    assert gpus.lookup(name) is None


# --- PyTorch's old template bullet ----------------------------------------------------------------


def test_template_bullet_nvidia_name() -> None:
    facts = read_capture("template_env_bullets_old__pytorch-6098_940mx.txt")
    assert gpu_names(facts) == ["NVIDIA 940MX"]
    assert facts.gpus[0].compute_capability == "5.0"
    assert facts.driver.version is None


# pytorch/pytorch#19304 (description by LoveZL0512, 2019-04-16), cut: the template's checklist left
# blank.
_PYTORCH_19304 = (
    " - PyTorch Version (e.g., 1.0):\n"
    " - OS (e.g., Linux):\n"
    " - How you installed PyTorch (`conda`, `pip`, source):\n"
    " - Build command you used (if compiling from source):\n"
    " - Python version:\n"
    " - CUDA/cuDNN version:\n"
    " - GPU models and configuration:\n"
    " - Any other relevant information:\n"
)


def test_template_bullet_blank() -> None:
    assert collect_env.parse_template_gpu(_PYTORCH_19304).gpus == []
    assert not collect_env.detect_template_gpu(_PYTORCH_19304)


# --- open-gpu-kernel-modules' "### Hardware: GPU" -------------------------------------------------


def test_form_hardware_gpu_free_text() -> None:
    facts = read_capture(
        "form_open_kmod_branches_hw__open-gpu-kernel-modules-949_rtx-pro-6000-maxq.txt"
    )
    assert gpu_names(facts) == ["Nvidia pro 6000 blackwell max-q workstation"]
    assert facts.gpus[0].compute_capability == "12.0"
    assert facts.driver.version is None  # "580-open, 570-open, 575-open" are branches


# The form's field as other writers answered it, each cut to the field and the heading after it.
@pytest.mark.parametrize(
    ("text", "name", "cc"),
    [
        # NVIDIA/open-gpu-kernel-modules#888 (description by wpces, 2025-06-23)
        ("### Hardware: GPU\n\nrtx5090\n\n### Describe the bug\n", "rtx5090", "12.0"),
        # NVIDIA/open-gpu-kernel-modules#876 (description by nekromantik, 2025-06-07)
        ("### Hardware: GPU\n\nRTX 5070 TI\n\n### Describe the bug\n", "RTX 5070 TI", "12.0"),
        # NVIDIA/open-gpu-kernel-modules#651 (description by pr9543, 2024-06-04)
        (
            "### Hardware: GPU\n\nGeForce RTX 2070 Mobile / Max-Q Refresh\n\n"
            "### Describe the bug\n",
            "GeForce RTX 2070 Mobile / Max-Q Refresh",
            "7.5",
        ),
    ],
)
def test_form_hardware_gpu_answers(text: str, name: str, cc: str) -> None:
    facts = gpus.enrich(env_list.parse_env_list(text))
    assert gpu_names(facts) == [name]
    assert facts.gpus[0].compute_capability == cc


@pytest.mark.parametrize(
    "text",
    [
        # NVIDIA/open-gpu-kernel-modules#265 (description by YusufKhan-gamedev, 2022-05-27): a
        # sentence, not a name
        "### Hardware: GPU\n\nIts a RTX 2060 from GIGABYTE, I am not going to install the"
        " proprietary tool that is suggested\n\n### Describe the bug\n",
        # NVIDIA/open-gpu-kernel-modules#433 (description by Monsterovich, 2022-12-30):
        # nvidia-smi -L's line, its parser's
        "### Hardware: GPU\n\nGPU 0: NVIDIA GeForce RTX 3060 Ti (UUID:"
        " GPU-039a34f7-087c-dc8f-a607-e0d937443d0f)\n\n### Describe the bug\n",
        # NVIDIA/open-gpu-kernel-modules#935 (description by Floriy, 2025-09-21): lspci's line,
        # its parser's
        "### Hardware: GPU\n\nNVIDIA Corporation GB203M / GN22 [GeForce RTX 5090 Max-Q / Mobile]"
        " [10de:2c18] (rev a1)\n\n### Describe the bug\n",
    ],
)
def test_form_hardware_gpu_near_misses(text: str) -> None:
    assert env_list.parse_env_list(text).gpus == []


def test_form_hardware_gpu_uuid_line_read_once() -> None:
    """The -L line under the heading stays nvidia-smi's: one GPU, not two."""
    facts = read_capture("ogkm_form_gpu_uuid_nvsmi_header__ogkm-626_rtx4070-laptop-550.76.txt")
    assert gpu_names(facts) == ["NVIDIA GeForce RTX 4070 Laptop GPU"]


# --- a GPU's name alone after a retyped nvidia-smi header -----------------------------------------


def test_header_then_name() -> None:
    facts = read_capture("nvsmi_header_name_docker_info__nct-115_a100-pcie-535.104.05.txt")
    assert gpu_names(facts) == ["NVIDIA A100-PCIE-40GB"]
    assert facts.gpus[0].compute_capability == "8.0"
    assert (facts.driver.version, facts.driver.cuda_version) == ("535.104.05", "12.2")


@pytest.mark.parametrize(
    "text",
    [
        # Project-HAMi/HAMi#1520 (description by wangweihong), cut: the header alone in a fence
        "- nvidia driver or other AI device driver version:\n"
        "```\n"
        "+-----------------------------------------------------------------------------------------+\n"
        "| NVIDIA-SMI 570.124.06             Driver Version: 570.124.06     "
        "CUDA Version: 12.8     |\n"
        "```\n",
        # livepeer/ai-runner#679 (description by hjpotter92, 2025-07-14): the table's title alone
        "internal machines have been updated with newer nvidia driver\n"
        "\n"
        "```\n"
        "Mon Jul 14 07:46:26 2025       \n"
        "+-----------------------------------------------------------------------------------------+\n"
        "| NVIDIA-SMI 575.57.08              Driver Version: 575.57.08      "
        "CUDA Version: 12.9     |\n"
        "```\n",
    ],
)
def test_header_then_name_near_misses(text: str) -> None:
    assert nvidia_smi.parse_table(text).gpus == []
