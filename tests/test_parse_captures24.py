"""A generic key beside a GPU key, a capability in brackets after a GPU's name, bullets with " - "
separators, a bullet with nvidia-smi's compute_cap answer, a card's line below its operating
system's, the header's version pair with the card's name below it, ggml_vulkan's "VulkanN:"
lines, `ls -l` of libcuda.so.1's link, a cut "NVIDIA RTX PRO" name and docker inspect's Env list;
and the near misses that must stay unread."""

from __future__ import annotations

import pytest

from checks.facts import gpus
from checks.facts.model import HostFacts
from checks.facts.parsers import (
    containers,
    env_list,
    library_listing,
    llamacpp,
    stated_capability,
    sysinfo_lines,
)
from tests.conftest import FIXTURES
from tests.support.captures import assert_unread, gpu_models, read_capture, read_paste

CAPTURES = FIXTURES / "corpus" / "captures"


# --- a generic key beside a GPU key, a capability in brackets ---------------------------------


def test_the_machine_under_device_is_no_second_gpu() -> None:
    facts = read_capture("env_fence_generic_gpu_name__nemoclaw-4658_gb10-580.142.txt")
    assert gpu_models(facts) == [("NVIDIA JMJWOA-Generic-GPU", "12.1")]
    assert facts.driver.version == "580.142"


def test_a_device_key_alone_still_names_the_gpu() -> None:
    # Syllo/nvtop#426: "device : NVIDIA GB10" with no other GPU key.
    facts = read_capture("prose_sysinfo_gb10__nvtop-426_580.95.05-aarch64.txt")
    assert gpu_models(facts) == [("NVIDIA GB10", "12.1")]


def test_a_bracket_without_a_capability_gives_none() -> None:
    # NVIDIA/NemoClaw#4658's "Device" value: a host name and an address in the bracket.
    found = env_list._gpus("DGX Spark (spark-8158, 10.173.104.102)")
    assert [(g.name, g.compute_capability) for g in found] == [("DGX Spark", None)]


# --- bullets with " - " separators ---------------------------------------------------------


def test_docker_desktop_information_bullets_with_dashes() -> None:
    facts = read_capture("form_info_bullets_dash__docker-for-win-10218_gtx1080-465.21.txt")
    assert gpu_models(facts) == [("GTX 1080", "6.1")]
    assert (facts.driver.version, facts.driver.cuda_version) == ("465.21", None)


@pytest.mark.parametrize(
    "text",
    [
        # balena-os/balena-jetson-orin#541 (description by acostach, 2025-03-10; cut): a board
        # maker's name and a module joined by " - ", no key.
        "- Seeed J3010 - Orin Nano 4GB\n- Seed J4012 - Orin Nano 8GB\n",
        # docker/for-win#13074 (description by kiruthiga125, 2022-11-15; cut): the form
        # unanswered.
        "### Information\n\n  - Windows Version:\n  - Docker Desktop Version:\n"
        "  - WSL2 or Hyper-V backend?  \n"
        "  - Are you running inside a virtualized Windows e.g. on a cloud server or a VM:\n",
    ],
)
def test_dash_bullets_without_a_gpu_or_driver_key_are_not_read(text: str) -> None:
    assert env_list.parse_env_list(text) == HostFacts()


# --- a bullet with nvidia-smi's compute_cap answer -----------------------------------------


def test_a_board_bullet_with_its_queried_capability() -> None:
    facts = read_capture("env_bullet_inline_compute_cap__vllm-cpp-168_jetson-agx-thor.txt")
    assert gpu_models(facts) == [("NVIDIA Jetson AGX Thor", "11.0")]
    assert facts.driver.version is None


@pytest.mark.parametrize(
    "name",
    [
        # A key line, not a bullet whose first part is the name.
        "env_fence_generic_gpu_name__nemoclaw-4658_gb10-580.142.txt",
        # A capability in brackets after a name in prose.
        "nvsmi_table_details_prose_cc__koboldcpp-1272_gt740m-425.31.txt",
    ],
)
def test_lines_that_are_no_queried_bullet(name: str) -> None:
    text = (CAPTURES / name).read_text()
    assert stated_capability.parse_queried_bullet(text) == HostFacts()


# --- a card's line below its operating system's --------------------------------------------


def test_a_card_below_the_os_line() -> None:
    facts = read_capture("make_cflags_env_lines__llamacpp-5976_rtx3080ti.txt")
    assert gpu_models(facts) == [("RTX3080ti", "8.6")]
    assert facts.driver.cuda_version is None  # CUDA/v12.4 in the make lines is the toolkit's


def test_a_card_with_its_memory_in_brackets_below_the_os_line() -> None:
    # janhq/jan#1350 (comment by DutchyDutch, 2024-01-04; cut after the CPU line).
    text = (
        "Same here!\n\nWindows 11 pro\nRTX 4080 (16 GB)\n32 gigs ram.\n\n"
        "CPU is at 83% while the GPU flatlines at 0%\n"
    )
    assert gpu_models(read_paste(text)) == [("RTX 4080", "8.9")]


def test_keyed_environment_bullets_are_no_os_line() -> None:
    # janhq/jan#1350 (description by TashaSkyUp, 2024-01-04; cut): two cards in one bullet,
    # the operating system under a key.
    text = (
        "**Environment details**\n- Operating System: windows 10\n- Jan Version: 0.4.3\n"
        "- Processor: amd 3900x\n- RAM: 96gb\n- 970 4gb, 3090 24gb\n"
    )
    assert sysinfo_lines.parse_sysinfo_lines(text) == HostFacts()
    assert_unread(text)


# --- the header's version pair with the card's name below ----------------------------------


def test_the_name_below_the_header_fragment() -> None:
    facts = read_capture("nvsmi_header_fragment_prose__ollama-2064_gtx950m-545.29.06.txt")
    assert gpu_models(facts) == [("NVIDIA GeForce GTX 950M", "5.0")]
    assert (facts.driver.version, facts.driver.cuda_version) == ("545.29.06", "12.3")


def test_a_pair_inside_other_words_names_no_gpu() -> None:
    # microsoft/WSL#7627 (description by doo5643, 2021-10-31; cut): the pair typed across two
    # lines after other words, a heading below it.
    text = (
        "### Other Software\n\nDocker Engine - Community : 20.10.10\n"
        "NVIDIA Driver Version: 510.06 \nCUDA Version: 11.6\n\n### Repro Steps\n"
    )
    facts = read_paste(text)
    assert (facts.driver.version, facts.driver.cuda_version) == ("510.06", "11.6")
    assert facts.gpus == []


# --- ggml_vulkan's "VulkanN:" lines --------------------------------------------------------


def test_a_vulkan_device_line_of_nvidias_driver() -> None:
    facts = read_capture("ggml_vulkan_found_two_runs__llamacpp-9716_rtx3060-laptop.txt")
    assert gpu_models(facts) == [("NVIDIA GeForce RTX 3060 Laptop GPU", "8.6")]


@pytest.mark.parametrize(
    "text",
    [
        # ollama/ollama#5059 (comment by fbuechler, 2024-10-02; cut): AMD's driver.
        "ggml_vulkan: Found 1 Vulkan devices:\n"
        "Vulkan0: Radeon RX 570 Series (AMD proprietary driver) | uma: 0 | fp16: 0 | warp size:"
        " 64\n"
        "llm_load_tensors: ggml ctx size =    0.27 MiB\n",
        # ggml-org/llama.cpp#6166 (description by morphles, 2024-03-19; cut): the early shape,
        # no driver named.
        "ggml_vulkan: Found 1 Vulkan devices:\nVulkan0: Radeon RX 7900 XTX | uma: 0 | fp16: 1 |"
        " warp size: 64\n",
    ],
)
def test_vulkan_devices_of_other_drivers_are_not_gpus(text: str) -> None:
    assert llamacpp.parse_llamacpp(text).gpus == []


# --- `ls -l` of libcuda.so.1's link --------------------------------------------------------


def test_the_link_of_libcuda_mounted_into_a_container() -> None:
    facts = read_capture("ls_libcuda_in_container__ollama-6383_525.147.05.txt")
    assert facts.driver.version == "525.147.05"
    assert facts.gpus == []


@pytest.mark.parametrize(
    "text",
    [
        # gw0/docker-keras-full#4 (comment by somitgupta; cut): the soname links to the stub.
        "lrwxrwxrwx 1 root root       10 Feb 16 11:10 /usr/lib/x86_64-linux-gnu/libcuda.so.1 ->"
        " libcuda.so\n"
        "-rwxr-xr-x 1 root root  8294408 Dec 19 21:59"
        " /usr/lib/x86_64-linux-gnu/libcuda.so.375.26\n",
        # NVIDIA/nvidia-container-toolkit#1055: ldconfig's lines alone, a compat libcuda first.
        "        libcuda.so.1 (libc6,x86-64) => /usr/local/cuda-12.8/compat/libcuda.so.1\n"
        "        libcuda.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so.1\n",
        # exasol/script-languages-release#503 (comment by tkilias; cut): the driver installer's
        # files listed bare, nothing installed.
        "(base) root@b9157bf10733:/tmp/NVIDIA-Linux-x86_64-510.47.03# ls | cat\n"
        "10_nvidia.json\n10_nvidia_wayland.json\n15_nvidia_gbm.json\n32\nfirmware\nhtml\nkernel\n"
        "libcuda.so.510.47.03\nlibEGL_nvidia.so.510.47.03\n",
    ],
)
def test_listings_without_the_drivers_link_give_no_driver(text: str) -> None:
    assert not library_listing.detect_library_listing(text)


# --- a cut "NVIDIA RTX PRO" name -----------------------------------------------------------


def test_a_cut_rtx_pro_name_is_blackwell() -> None:
    facts = read_capture(
        "nvsmi_table_snap_old_smi_new_driver__inference-snaps-89_rtx-pro-580.95.05.txt"
    )
    assert gpu_models(facts) == [("NVIDIA RTX PRO", "12.0")]
    assert (facts.driver.version, facts.driver.cuda_version) == ("580.95.05", "13.0")


@pytest.mark.parametrize(
    ("start", "capability"),
    [("NVIDIA RTX PRO", "12.0"), ("RTX PRO", "12.0"), ("NVIDIA RTX", None), ("NVIDIA RTX A", None)],
)
def test_a_cut_family_name_has_a_capability_only_where_every_model_agrees(
    start: str, capability: str | None
) -> None:
    assert gpus.cut_capability(start) == capability


# --- docker inspect's Env list -------------------------------------------------------------


def test_an_images_env_list_is_the_images_and_says_nothing_of_the_host() -> None:
    facts = read_capture("docker_inspect_env_ngc_vllm__vllm-dgx-spark-1_no-host-facts.txt")
    assert (facts.driver.version, facts.driver.cuda_version, facts.gpus) == (None, None, [])
    (image,) = facts.containers.images
    assert (image.ref, image.cuda_version) == (None, "13.0.2.006")


def test_a_whole_image_inspect_is_read_once() -> None:
    text = (FIXTURES / "images" / "vllm-openai_v0.8.5.json").read_text()
    assert not containers.detect_env_items(text)
    assert len(read_paste(text).containers.images) == 1


def test_a_cuda_version_in_prose_is_no_env_list() -> None:
    # bitsandbytes-foundation/bitsandbytes#1510: "PyTorch settings found: CUDA_VERSION=128".
    path = FIXTURES / "corpus" / "logs" / "heldout11" / "err_bnb-no-cu128-binary__bnb-1510.txt"
    assert not containers.detect_env_items(path.read_text())
