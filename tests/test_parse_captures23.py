"""Journal prefixes with a month of more than one word, full-width punctuation, a GPU line with
its count in a System Info answer, the driver's CUDA written as the driver, a capability in
brackets after a GPU's name, Kokkos' device check, a package stated in a bullet, Jetson bullets
and the ComfyUI Launcher's diagnostic file; and the near misses that must stay unread."""

from __future__ import annotations

import pytest

from checks.facts import capture
from checks.facts.model import Gpu, HostFacts, fill_in
from checks.facts.parsers import (
    comfy_launcher,
    driver_cuda,
    jetson_bullets,
    packages,
    stated_capability,
    sysinfo_lines,
)
from tests.support.captures import assert_unread, gpu_models, read_capture, read_paste

# --- journal prefixes --------------------------------------------------------------------------

# ollama/ollama#8532 (comment by troed, 2025-01-27; cut): a lower-case month, one word.
TROED = (
    "jan 27 17:08:19 desktop ollama[1646734]: calling cuDriverGetVersion\n"
    "jan 27 17:08:19 desktop ollama[1646734]: raw version 0x2f1c\n"
    "jan 27 17:08:19 desktop ollama[1646734]: CUDA driver version: 12.6\n"
)
# ollama/ollama#9245 (comment by lry789, 2025-02-21; cut): a Chinese month, a number and a word.
LRY = (
    "2\u6708 21 13:31:11 tc ollama[285585]: CUDA driver version: 12.3\n"
    "2\u6708 21 13:31:11 tc ollama[285585]: calling cuDeviceGetCount\n"
)


def test_a_catalan_month_of_two_words_is_a_journal_prefix() -> None:
    facts = read_capture("ollama_journal_ggml_two_quadros__ollama-13312_p2200-p2000.txt")
    assert gpu_models(facts) == [("Quadro P2200", "6.1"), ("Quadro P2000", "6.1")]
    assert [g.index for g in facts.gpus] == [0, 1]


@pytest.mark.parametrize(
    ("text", "first"),
    [(TROED, "calling cuDriverGetVersion"), (LRY, "CUDA driver version: 12.3")],
)
def test_months_of_one_word_still_come_off(text: str, first: str) -> None:
    assert capture.clean(text).split("\n")[0] == first


def test_a_date_line_without_a_process_keeps_its_words() -> None:
    # noonghunna/club-3090#617 (description by paulp83, 2026-07-06): nvidia-smi's date line.
    line = "Mon Jul  6 21:27:35 2026       "
    assert capture.clean(f"nvidia-smi\n{line}\n") == f"nvidia-smi\n{line}\n"


# --- full-width punctuation --------------------------------------------------------------------


def test_collect_env_gpu_lines_with_a_full_width_colon_are_read() -> None:
    facts = read_capture("collectenv_fullwidth_colon_gpus__pytorch-37212_4x-p100-410.104.txt")
    assert gpu_models(facts) == [("Tesla P100-PCIE-16GB", "6.0")] * 4
    assert [g.index for g in facts.gpus] == [0, 1, 2, 3]
    assert facts.driver.version == "410.104"


def test_a_name_ends_at_a_full_width_bracket_and_cuda_beside_nvcc_is_the_drivers() -> None:
    facts = read_capture("form_fullwidth_colon_lines__llamacpp-22499_rtx5080-591.86.txt")
    assert gpu_models(facts) == [("RTX 5080", "12.0")]
    assert (facts.driver.version, facts.driver.cuda_version) == ("591.86", "13.1")


@pytest.mark.parametrize(
    ("line", "cleaned"),
    [
        # pytorch/pytorch#37212 and ggml-org/llama.cpp#22499: a line of each.
        ("GPU 0\uff1a Tesla P100-PCIE-16GB", "GPU 0: Tesla P100-PCIE-16GB"),
        ("GPU\uff1aRTX 5080\uff08Blackwell\uff09", "GPU: RTX 5080 (Blackwell)"),
    ],
)
def test_full_width_marks_turn_to_their_ascii_forms(line: str, cleaned: str) -> None:
    assert capture.clean(line + "\n") == cleaned + "\n"


@pytest.mark.parametrize(
    "text",
    [
        # Hellod035/LeggedLab#26 (title by hhz0328, 2025-06-06): a series, not a GPU's name.
        "CUDA error\uff1aRTX 50xx\u2018s sm_120 is not compatible with the current PyTorch"
        " installation\n",
        # xorbitsai/inference#4745 (description by liaoyuanyi, 2026-03-30; cut): prose with
        # full-width commas.
        "### System Info / \u7cfb\u7d71\u4fe1\u606f\n\n\u5f53\u524d\u64cd\u4f5c\u7cfb\u7edf\u662f"
        "Ubuntu 22.04.5LTS\uff0c\u663e\u5361\u662f4090\uff0cCUDA\u7248\u672c\u4e3a12.6\uff0c"
        "vllm\u7248\u672c\u4e3a0.8.5.post1\n",
    ],
)
def test_full_width_text_names_no_gpu_of_its_own(text: str) -> None:
    assert_unread(text)


def test_a_bare_cuda_bullet_is_not_the_drivers() -> None:
    # nvidia-cosmos/cosmos-reason2#45: "- **CUDA:** 12.6" is the JetPack's toolkit.
    facts = read_capture(
        "pr_tested_on_bold_bullets_jetson__cosmos-reason2-pr45_agx-orin-64gb-jp6.2.txt"
    )
    assert facts.driver.cuda_version is None


# --- a GPU line with its count -----------------------------------------------------------------


def test_a_card_and_its_count_in_a_system_info_answer() -> None:
    facts = read_capture("form_sysinfo_count_star__xinference-4057_4x-rtx5090.txt")
    assert gpu_models(facts) == [("nvidia5090", "12.0")] * 4
    assert facts.driver.cuda_version is None  # "cuda 12.4" may be the toolkit's


def test_a_system_info_answer_without_a_gpu_line_names_none() -> None:
    # xorbitsai/inference#4073 (description by frankSARU, 2025-09-16; cut).
    text = (
        "### System Info / \u7cfb\u7d71\u4fe1\u606f\n\nUbuntu 22.04 LTS\nCUDA 12.8\n"
        "Nvidia Driver 570.124.06\nPython 3.11\n"
    )
    assert sysinfo_lines.parse_sysinfo_lines(text).gpus == []
    facts = read_paste(text)
    assert facts.gpus == []
    assert facts.driver.cuda_version is None


# --- the driver's CUDA written as the driver ---------------------------------------------------


def test_a_driver_line_numbered_like_cuda_is_the_drivers_cuda() -> None:
    facts = read_capture("pip_versions_driver_cuda_major__aoneus-2_no-gpu.txt")
    assert (facts.driver.version, facts.driver.cuda_version) == (None, "13.0")


def test_a_driver_numbered_like_a_driver_is_no_cuda() -> None:
    # xorbitsai/inference#4073: "Nvidia Driver 570.124.06".
    text = "Ubuntu 22.04 LTS\nCUDA 12.8\nNvidia Driver 570.124.06\nPython 3.11\n"
    assert not driver_cuda.detect_driver_cuda(text)


def test_a_masked_driver_gives_the_cuda_after_it_and_no_driver() -> None:
    facts = read_capture("env_bullets_driver_wildcard__llama-cpp-python-2234_gtx1060-6gb.txt")
    assert (facts.driver.version, facts.driver.cuda_version) == (None, "12.5")
    assert gpu_models(facts) == [("NVIDIA GeForce GTX 1060 6GB", "6.1")]


# --- a capability in brackets after a name -----------------------------------------------------


def test_a_capability_beside_a_name_fills_in_the_listed_gpu() -> None:
    facts = read_capture("nvsmi_table_details_prose_cc__koboldcpp-1272_gt740m-425.31.txt")
    assert gpu_models(facts) == [("GeForce GT 740M", "3.5")]
    assert (facts.driver.version, facts.driver.cuda_version) == ("425.31", "10.1")


def test_a_capability_beside_a_name_adds_no_gpu_alone() -> None:
    # JuliaGPU/CUDA.jl#3187 (description by Audrius-St, 2026-07-03; cut to the warning).
    text = (
        "\u250c Warning: Your NVIDIA GeForce GTX 1080 GPU (compute capability 6.1) is not fully"
        " supported by CUDA 12.9.0.\n"
    )
    assert gpu_models(stated_capability.parse_stated_capability(text)) == [
        ("NVIDIA GeForce GTX 1080", "6.1")
    ]
    assert_unread(text)


def test_a_capability_away_from_the_name_is_not_read() -> None:
    # trexminer/T-Rex#134 (comment by trexminer, 2021-01-13).
    text = (
        "Unfortunately, GeForce GTX 765M is too old (Compute Capability 3.0, see "
        "https://developer.nvidia.com/cuda-gpus). T-Rex only supports CC 5.0+ GPUs."
    )
    assert stated_capability.parse_stated_capability(text).gpus == []


def test_filling_in_never_adds_a_gpu_nor_overwrites() -> None:
    found = [Gpu(index=0, name="GeForce GT 740M", compute_capability="3.0")]
    stated = [Gpu(name="GT 740M", compute_capability="3.5"), Gpu(name="GTX 1080")]
    assert not fill_in(found, stated)
    assert found == [Gpu(index=0, name="GeForce GT 740M", compute_capability="3.0")]


def test_statements_that_disagree_fill_in_nothing() -> None:
    found = [Gpu(index=0, name="GeForce GT 740M")]
    stated = [
        Gpu(name="GT 740M", compute_capability="3.5"),
        Gpu(name="GeForce GT 740M", compute_capability="3.0"),
    ]
    assert not fill_in(found, stated)
    assert found[0].compute_capability is None


# --- Kokkos' device check ----------------------------------------------------------------------


def test_kokkos_names_the_device_capability_not_the_builds() -> None:
    facts = read_capture("kokkos_warning_cc_no_name__kokkos-pr7887_cc12.0.txt")
    assert gpu_models(facts) == [(None, "12.0")]


@pytest.mark.parametrize(
    ("text", "capability"),
    [
        # kokkos/kokkos#1944 (description by wcohen, 2018-12-18; cut to the message).
        (
            "Kokkos::Cuda::initialize ERROR: running kernels compiled for compute capability 0.0"
            " (< 5.0) on device with compute capability 5.0 (>=5.0), this would give incorrect"
            " results!\nAborted (core dumped)\n",
            "5.0",
        ),
        # arborx/ArborX#109 (description by aprokop, 2019-09-25; cut to the message).
        (
            "Kokkos::Cuda::initialize ERROR: running kernels compiled for compute capability 0.0"
            " (< 5.0) on device with compute capability 6.1 (>=5.0), this would give incorrect"
            " results!\nAborted\n",
            "6.1",
        ),
        # Mantevo/miniMD#11 (description by wrwilliams, 2020-03-19; cut to the warning).
        (
            "Kokkos::Cuda::initialize WARNING: running kernels compiled for compute capability"
            " 0.0 on device with compute capability 3.5 , this will likely reduce potential"
            " performance.\n",
            "3.5",
        ),
    ],
)
def test_kokkos_error_and_warning_give_the_device_capability(text: str, capability: str) -> None:
    assert gpu_models(read_paste(text)) == [(None, capability)]


def test_the_message_without_kokkos_words_is_not_read() -> None:
    # kokkos/kokkos#3026 (description by makortel, 2020-05-11): the message as quoted, cut.
    assert_unread(
        "ERROR: running kernels compiled for compute capability 7.0 on device with compute "
        "capability 7.5 is not supported by CUDA!\n"
    )


# --- a package stated in a bullet --------------------------------------------------------------


def test_a_package_bullet_of_the_drivers_userspace_gives_the_driver() -> None:
    facts = read_capture("nvsmi_L_mig_deb_bullets__nct-203_a100-80gb-pcie-530.30.02.txt")
    assert facts.driver.version == "530.30.02"
    assert facts.containers.toolkit_version == "1.14.3"
    assert gpu_models(facts) == [("NVIDIA A100 80GB PCIe", "8.0")]


def test_a_package_named_without_a_version_is_not_read() -> None:
    # oddmario/NVIDIA-Ubuntu-Driver-Guide#5 (description by ClaireRupikaRamode, 2024-12-13).
    text = (
        'After following all the steps when i try to run "sudo apt install nvidia-driver-555" '
        "i receive this error:\n\nE: Unable to locate package nvidia-graphics-drivers-555\n\n"
        "Should i stay with 550, try 560 or wait?\n"
    )
    assert not packages.detect_packages(text)


# --- Jetson bullets ----------------------------------------------------------------------------


def test_a_tested_on_list_names_the_jetson_and_its_jetpack() -> None:
    facts = read_capture(
        "pr_tested_on_bold_bullets_jetson__cosmos-reason2-pr45_agx-orin-64gb-jp6.2.txt"
    )
    assert gpu_models(facts) == [("Jetson AGX Orin 64GB", "8.7")]
    assert facts.system.jetpack_release == "6.2"


def test_bullets_beside_a_tools_l4t_release_are_not_read() -> None:
    facts = read_capture("nv_tegra_release_r36__jetson-stats-791_orin-nano-36.4.7.txt")
    assert facts.gpus == []
    assert (facts.system.l4t_release, facts.system.jetpack_release) == ("36.4.7", None)


def test_a_list_of_boards_without_keys_names_none() -> None:
    # balena-os/balena-jetson-orin#541 (description by acostach, 2025-03-10): boards updated.
    text = (
        "This PR updates the 6 Jetson Orin devices below to Jetpack 6.2 - L4T 36.4.3:\n\n"
        "- Jetson Orin Nano 8GB Devkit\n- Jetson AGX Orin 32GB Devkit\n"
        "- Jetson AGX Orin 64GB Devkit\n- Jetson Orin NX in Xavier NX\n"
        "- Seeed J3010 - Orin Nano 4GB\n- Seed J4012 - Orin Nano 8GB\n"
    )
    assert jetson_bullets.parse_jetson_bullets(text) == HostFacts()


# --- the ComfyUI Launcher's diagnostic file ----------------------------------------------------


def test_the_launchers_file_gives_driver_cuda_and_the_cuda_device_once() -> None:
    facts = read_capture("comfy_launcher_diagnostic__latentsyncwrapper-128_rtx4090-572.60.txt")
    assert (facts.driver.version, facts.driver.cuda_version) == ("572.60", "12.8")
    assert gpu_models(facts) == [("NVIDIA GeForce RTX 4090", "8.9")]
    assert facts.gpus[0].pci_bus_id == "00000000:01:00.0"


def test_directml_and_hip_devices_are_not_gpus_of_the_cuda_driver() -> None:
    # Lightricks/ComfyUI-LTXVideo#269 (description by ZokiJava, 2025-08-17; cut to the
    # sections): an AMD GPU under HIP and under DirectML, the NVIDIA card there three times.
    text = (
        "NVIDIA Management Library:\n  NVIDIA Driver Version: 576.80\n"
        "  NVIDIA Management Library Version: 12.576.80\n\n"
        "CUDA Driver:\n  Version: 12090\n  Devices: \n"
        "    00000000:01:00.0 0: NVIDIA GeForce RTX 4060 Laptop GPU [89] 7 GB\n\n"
        "HIP Driver:\n  Driver Version: 50732000\n  Runtime Version: 50732000\n  Devices: \n"
        "    00000000:06:00.0 0: AMD Radeon(TM) Graphics [gfx1036, 103] 12 GB\n\n"
        "DirectML Driver: \n  Devices: \n"
        "    10400 0: NVIDIA GeForce RTX 4060 Laptop GPU 7 GB\n"
        "    5710 1: AMD Radeon(TM) Graphics 0 GB\n"
        "    10400 2: NVIDIA GeForce RTX 4060 Laptop GPU 7 GB\n"
        "    10400 3: NVIDIA GeForce RTX 4060 Laptop GPU 7 GB\n"
    )
    facts = read_paste(text)
    assert gpu_models(facts) == [("NVIDIA GeForce RTX 4060 Laptop GPU", "8.9")]
    assert (facts.driver.version, facts.driver.cuda_version) == ("576.80", "12.9")


def test_a_directml_section_alone_is_not_the_launchers_file() -> None:
    # ShmuelRonen/ComfyUI-LatentSyncWrapper#128: the DirectML section on its own.
    text = "DirectML Driver: \n  Devices: \n    9860 0: NVIDIA GeForce RTX 4090 23 GB\n"
    assert not comfy_launcher.detect_comfy_launcher(text)
