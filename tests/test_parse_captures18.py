"""The shapes capture set 18 read: a driver installed in the numbered steps of a reproduction,
nvidia-container-cli's firmware path (named after the driver version), the kernel's
"NVRM: GPU at PCI:..." lines (a GPU by bus id and uuid), and a llama.cpp CUDA build that found no
device (a CUDA build, no GPU count); and the near misses that must stay unread."""

from __future__ import annotations

import pytest

from checks.facts.model import Gpu, HostFacts, merge
from checks.facts.parsers import containers, driver_prose, kernel, llamacpp
from tests.support.captures import read_capture, read_paste

# --- a driver installed in the steps of a reproduction --------------------------------------------

# hyprwm/Hyprland#7016 (description by phonetic112, 2024-07-24), cut: from the form's system info
# to its reproduction steps.
_HYPRLAND = (
    "### System Info and Version\n"
    "\n"
    "RTX 4070, latest git\n"
    "\n"
    "### Description\n"
    "\n"
    "Hyprland starts with a black screen. DRM gets initialized, but nothing renders.\n"
    "\n"
    "sway and pre-https://github.com/hyprwm/Hyprland/commit/016da234d0e852de3ef20eb2e89ac58d2a85f6e7"
    " works.\n"
    "\n"
    "### How to reproduce\n"
    "\n"
    "1. Install 550.100 drivers\n"
    "2. Start Hyprland from a TTY\n"
)


@pytest.mark.parametrize(
    ("name", "driver"),
    [
        # microsoft/WSL#7056: '1. install cuda on wsl driver (geforce, driver version 470.76)'
        # under 'Those are the steps I followed:'; the runfile 'cuda_11.3.1_465.19.01_linux.run'
        # two steps on is not the driver.
        ("wsl_form_repro_driver_prose__wsl-7056_geforce-470.76.txt", "470.76"),
        # NVIDIA/nvidia-docker#1171: a fence under '### 2. Steps to reproduce the issue'.
        ("nvdocker_template_steps_driver_prose__nvidia-docker-1171_440.44.txt", "440.44"),
    ],
)
def test_a_driver_installed_in_the_reproduction_steps_is_read(name: str, driver: str) -> None:
    assert read_capture(name).driver.version == driver


def test_a_version_before_the_word_drivers_in_a_step_is_read() -> None:
    assert driver_prose.parse_driver_prose(_HYPRLAND).driver.version == "550.100"


@pytest.mark.parametrize(
    "text",
    [
        # hyprwm/Hyprland#7016, cut to the two steps: without the words that make them the
        # steps taken, "Install" may be a plan.
        "1. Install 550.100 drivers\n2. Start Hyprland from a TTY\n",
        # UT-Austin-RPL/GIGA#22 (QiNaN-Zhang, 2022-11-14): a version inside a runfile's name.
        "But when I try to install cuda from nvidia by \n"
        "wget https://developer.download.nvidia.com/compute/cuda/11.5.0/local_installers/"
        "cuda_11.5.0_495.29.05_linux.run\n"
        "sudo sh cuda_11.5.0_495.29.05_linux.run\n"
        "It will warn like that:\n",
        # markstrefford/running-detectron2-on-windows-wsl2-rtx30xx#4 (solarflarefx, 2021-06-08),
        # cut: a version inside an installer's name, in a numbered account.
        "1. I tried installing CUDA and it seems that did not actually work.\n"
        "\n"
        "I downloaded the WSL drivers from: https://developer.nvidia.com/cuda/wsl/download\n"
        "\n"
        "I downloaded and ran the exe: 470.76_gameready_win10-dch_64bit_international.exe\n",
        # GoogleCloudPlatform/compute-gpu-installation#10 (JulesBelveze, 2022-05-16), cut: a
        # version in a download's address and file name.
        "[2022-05-05 12:35:02] Executing: curl -fSsl -O https://us.download.nvidia.com/XFree86/"
        "Linux-x86_64/495.46/NVIDIA-Linux-x86_64-495.46.run\n"
        "\n"
        "\n"
        "[2022-05-05 12:35:03] Executing: sh NVIDIA-Linux-x86_64-495.46.run -s\n",
        # dartraiden/NVIDIA-patcher#335 (prstzbd, 2025-09-20): the driver and an older one.
        "The new driver version 581.29 crashes all games after a while. The previous version"
        " 581.15 had a problem where any game ran at 30 fps, no more. GPU: CMP40HX\n",
    ],
)
def test_plans_file_names_and_older_drivers_stay_unread(text: str) -> None:
    assert driver_prose.parse_driver_prose(text).driver.version is None


def test_a_step_install_that_a_later_step_replaces_stays_unread() -> None:
    # ggml-org/llama.cpp#23765: '1. Install NVIDIA display driver version 576.33' (or older),
    # then '3. Update the NVIDIA driver to a version newer than 576.33.'
    facts = read_capture("version_template_hardware_line__llamacpp-23765_rtx5060-laptop.txt")
    assert facts.driver.version is None


# --- nvidia-container-cli's firmware path --------------------------------------------------------

# NVIDIA/k8s-device-plugin#324 (description by mpu-creare, its log of 2022-07-21; nvidia-smi
# there reports 515.48.07), cut to the lines after the libraries.
_LISTING_FIRMWARE = (
    "```bash\n"
    "W0721 15:49:10.076498 157656 nvc_info.c:403] missing compat32 library libnvoptix.so\n"
    "W0721 15:49:10.076506 157656 nvc_info.c:403] missing compat32 library libnvidia-cbl.so\n"
    "I0721 15:49:10.076824 157656 nvc_info.c:299] selecting /usr/bin/nvidia-smi\n"
    "I0721 15:49:10.076846 157656 nvc_info.c:299] selecting /usr/bin/nvidia-debugdump\n"
    "I0721 15:49:10.076867 157656 nvc_info.c:299] selecting /usr/bin/nvidia-persistenced\n"
    "I0721 15:49:10.076898 157656 nvc_info.c:299] selecting /usr/bin/nvidia-cuda-mps-control\n"
    "I0721 15:49:10.076920 157656 nvc_info.c:299] selecting /usr/bin/nvidia-cuda-mps-server\n"
    "W0721 15:49:10.076964 157656 nvc_info.c:425] missing binary nv-fabricmanager\n"
    "I0721 15:49:10.076995 157656 nvc_info.c:343] listing firmware path"
    " /usr/lib/firmware/nvidia/515.48.07/gsp.bin\n"
    "I0721 15:49:10.077023 157656 nvc_info.c:529] listing device /dev/nvidiactl\n"
    "I0721 15:49:10.077031 157656 nvc_info.c:529] listing device /dev/nvidia-uvm\n"
    "I0721 15:49:10.077039 157656 nvc_info.c:529] listing device /dev/nvidia-uvm-tools\n"
    "I0721 15:49:10.077047 157656 nvc_info.c:529] listing device /dev/nvidia-modeset\n"
    "I0721 15:49:10.077074 157656 nvc_info.c:343] listing ipc path"
    " /run/nvidia-persistenced/socket\n"
    "W0721 15:49:10.077099 157656 nvc_info.c:349] missing ipc path"
    " /var/run/nvidia-fabricmanager/socket\n"
)
# NVIDIA/nvidia-container-toolkit#671 (comment by gfrankliu, 2024-08-29): under a driver root, the
# glob the lookup found nothing for.
_MISSING_FIRMWARE_GLOB = (
    "W0829 16:57:45.375509 1151 nvc_info.c:470] missing firmware path"
    " /usr/lib/firmware/nvidia/535.183.01/gsp*.bin\n"
)


@pytest.mark.parametrize(
    ("text", "driver"),
    [(_LISTING_FIRMWARE, "515.48.07"), (_MISSING_FIRMWARE_GLOB, "535.183.01")],
)
def test_the_firmware_path_names_the_driver(text: str, driver: str) -> None:
    assert containers.detect_container_cli_debug(text)
    assert read_paste(text).driver.version == driver


def test_the_firmware_path_of_a_paste_cut_before_the_devices_is_read() -> None:
    # NVIDIA/nvidia-container-toolkit#251: 'missing firmware path /lib/firmware/nvidia/460.91.03'.
    facts = read_capture("nvc_info_debug_firmware_path__nct-251_460.91.03.txt")
    assert (facts.driver.version, facts.gpus) == ("460.91.03", [])


def test_missing_libraries_alone_name_no_driver() -> None:
    # kata-containers/kata-containers#10457 (description by junqiang0718, its log of October 24).
    text = (
        "W1024 02:45:36.664551 141 nvc_info.c:403] missing library libnvidia-compiler.so\n"
        "W1024 02:45:36.664554 141 nvc_info.c:403] missing library libnvidia-ngx.so\n"
        "W1024 02:45:36.664556 141 nvc_info.c:403] missing library libnvidia-eglcore.so\n"
    )
    assert not containers.detect_container_cli_debug(text)
    assert containers.parse_container_cli_debug(text).driver.version is None


# --- the kernel's "NVRM: GPU at PCI:..." lines ----------------------------------------------------

# akash-network/support#244 (description by andy108369, 2024-08-09), cut to the first GPUs.
_DMESG_T = (
    "root@node4:~# dmesg -T |grep NVRM\n"
    "[Sun Jul 28 09:15:27 2024] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.183.01"
    "  Sun May 12 19:39:15 UTC 2024\n"
    "[Wed Jul 31 23:14:18 2024] NVRM: GPU at PCI:0000:00:05:"
    " GPU-efbdfde9-5798-a6e7-4c46-12518fa15375\n"
    "[Wed Jul 31 23:14:18 2024] NVRM: GPU Board Serial Number: 1650423013443\n"
    "[Wed Jul 31 23:14:18 2024] NVRM: Xid (PCI:0000:00:05): 43, pid=1045242,"
    " name=pt_main_thread, Ch 00000008\n"
    "[Wed Jul 31 23:15:26 2024] NVRM: Xid (PCI:0000:00:05): 43, pid=1084984,"
    " name=pt_main_thread, Ch 00000008\n"
    "[Mon Aug  5 03:54:13 2024] NVRM: GPU at PCI:0000:00:07:"
    " GPU-3b6ec030-5adc-1847-e155-79f635584b4e\n"
    "[Mon Aug  5 03:54:13 2024] NVRM: GPU Board Serial Number: 1652923017935\n"
    "[Mon Aug  5 03:54:13 2024] NVRM: Xid (PCI:0000:00:07): 31, pid=2512125, name=python3.10,"
    " Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_8 faulted @"
    " 0x73ac_1c000000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_WRITE\n"
    "[Fri Aug  9 13:32:56 2024] NVRM: GPU at PCI:0000:00:08:"
    " GPU-c24840ec-8de1-83d5-b126-08000173ae32\n"
    "[Fri Aug  9 13:32:56 2024] NVRM: GPU Board Serial Number: 1652923018111\n"
    "[Fri Aug  9 13:32:56 2024] NVRM: Xid (PCI:0000:00:08): 94, pid='<unknown>',"
    " name=<unknown>, Contained: SM (0x1). RST: No, D-RST: No\n"
)
# leptonai/gpud components/accelerator/nvidia/error/sxid/README.md (at 211f86c7), cut: a quoted
# dmesg where NVSwitches' SXid lines follow the GPU's.
_QUOTED_WITH_NVSWITCHES = (
    "> [6781741.548768] NVRM: GPU at PCI:0000:91:00: GPU-b6c3b2be-c55b-d076-fa0e-d464e4c7e08b\n"
    ">\n"
    "> [6781741.548776] NVRM: GPU Board Serial Number: 1653723052734\n"
    ">\n"
    "> [6781741.548779] NVRM: Xid (PCI:0000:91:00): 79, pid='<unknown>', name=<unknown>,"
    " GPU has fallen off the bus.\n"
    ">\n"
    "> [6781741.548783] NVRM: GPU 0000:91:00.0: GPU has fallen off the bus.\n"
    ">\n"
    "> [6781753.400584] nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20034, Fatal,"
    " Link 48 LTSSM Fault Up\n"
    ">\n"
    "> [6781753.404587] nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20034, Fatal,"
    " Link 63 LTSSM Fault Up\n"
)


def test_each_gpu_at_pci_line_is_a_gpu_by_bus_id_and_uuid() -> None:
    facts = read_paste(_DMESG_T)
    assert [(g.pci_bus_id, g.uuid, g.name) for g in facts.gpus] == [
        ("0000:00:05.0", "GPU-efbdfde9-5798-a6e7-4c46-12518fa15375", None),
        ("0000:00:07.0", "GPU-3b6ec030-5adc-1847-e155-79f635584b4e", None),
        ("0000:00:08.0", "GPU-c24840ec-8de1-83d5-b126-08000173ae32", None),
    ]
    assert facts.driver.kernel_module_version == "535.183.01"


def test_a_quoted_dmesg_gives_the_gpu_and_not_the_nvswitches() -> None:
    facts = read_paste(_QUOTED_WITH_NVSWITCHES)
    assert [(g.pci_bus_id, g.uuid) for g in facts.gpus] == [
        ("0000:91:00.0", "GPU-b6c3b2be-c55b-d076-fa0e-d464e4c7e08b")
    ]


def test_the_gpu_that_never_initialises_is_still_there() -> None:
    # Start9Labs/start-technologies#3693: found, then 'RmInitAdapter failed!' every minute.
    facts = read_capture(
        "nvrm_dmesg_prose_driver__start-technologies-pr3693_dgx-spark-580.173.02.txt"
    )
    assert [(g.pci_bus_id, g.uuid, g.name) for g in facts.gpus] == [
        ("000f:01:00.0", "GPU-0f059bf0-a212-94c1-44a7-1068a6c6be66", None)
    ]


def test_the_same_gpu_from_the_kernel_and_from_nvidia_smi_is_one() -> None:
    # nvidia-smi writes the bus id with an 8-digit domain and the function.
    merged = HostFacts()
    merge(merged, HostFacts(gpus=[Gpu(index=0, pci_bus_id="00000000:00:05.0")]))
    merge(merged, kernel.parse_gpu_at_pci(_DMESG_T))
    assert [g.pci_bus_id for g in merged.gpus] == [
        "00000000:00:05.0",
        "0000:00:07.0",
        "0000:00:08.0",
    ]
    assert merged.gpus[0].uuid == "GPU-efbdfde9-5798-a6e7-4c46-12518fa15375"


@pytest.mark.parametrize(
    "text",
    [
        # Cyridd/cmpunlocker#4 (ms903x1): a GPU the driver could not start, named by bus alone.
        "[   21.091872] NVRM: GPU 0000:01:00.0: RmInitAdapter failed! (0x22:0x56:894)\n"
        "[   21.092238] NVRM: GPU 0000:01:00.0: rm_init_adapter failed, device minor number 0\n",
        # NVIDIA/NVSentinel#155 (comment by lalitadithya, 2025-10-25): an Xid quoted in a sentence.
        "note: this should duplicate `NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the"
        " bus`\n",
    ],
)
def test_other_nvrm_lines_add_no_gpu(text: str) -> None:
    assert not kernel.detect_gpu_at_pci(text)
    assert kernel.parse_gpu_at_pci(text).gpus == []


# --- a llama.cpp CUDA build that found no device ------------------------------------------------

# ggml-org/llama.cpp#6184 (description by thekevinscott, 2024-03-20), cut: the 2023 message and
# the head of the full log.
_NO_DEVICES_2023 = (
    "```\n"
    "ggml_init_cublas: no CUDA devices found, CUDA will be disabled\n"
    "```\n"
    "\n"
    "Full logs:\n"
    "\n"
    "```\n"
    "Log start\n"
    "main: build = 2406 (48358b2e)\n"
    "main: built with cc (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0 for x86_64-linux-gnu\n"
    "main: seed  = 1710958493\n"
)


def test_a_build_that_found_no_device_is_a_cuda_build_with_no_gpu_count() -> None:
    facts = llamacpp.parse_llamacpp(_NO_DEVICES_2023)
    build = facts.llamacpp[0]
    assert (build.version, build.commit, build.cuda) == ("2406", "48358b2e", True)
    assert facts.gpus == []


def test_the_message_quoted_in_a_sentence_is_read() -> None:
    # ggml-org/llama.cpp#6184 (comment by thekevinscott, 2024-03-20): the 2024 wording in
    # backticks, above a log with no device line.
    facts = read_capture("llamacpp_main_log_no_devices__llamacpp-6184_no-gpu.txt")
    assert [(b.version, b.commit, b.cuda) for b in facts.llamacpp] == [("2477", "f9c7ba34", True)]
    assert facts.gpus == []


def test_the_older_build_line_of_a_fork_is_read() -> None:
    # ikawrakow/ik_llama.cpp#386: 'main: build = 3673 (4084ca73)' below its device lines.
    facts = read_capture("llamacpp_ggml_init_details_code__ikllama-386_rtx4080.txt")
    assert [(b.version, b.commit, b.cuda) for b in facts.llamacpp] == [("3673", "4084ca73", True)]


def test_no_cuda_devices_without_ggml_words_is_not_llamacpp() -> None:
    # zylon-ai/private-gpt#1652 (Verzul13, 2024-02-26), cut: the message retold, and nvidia-smi
    # shows the GPU the runtime did not find.
    text = (
        "Hi! When I launch the project via docker compose, I get: no CUDA devices found, CUDA will"
        " be disabled. \n"
        "nvidia-smi:\n"
        "`+-----------------------------------------------------------------------------+\n"
        "| NVIDIA-SMI 525.147.05   Driver Version: 525.147.05   CUDA Version: 12.0     |\n"
        "|-------------------------------+----------------------+----------------------+\n"
        "| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |\n"
        "| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |\n"
        "|                               |                      |               MIG M. |\n"
        "|===============================+======================+======================|\n"
        "|   0  NVIDIA GeForce ...  Off  | 00000000:03:00.0  On |                  N/A |\n"
        "|  0%   40C    P8    17W / 200W |     18MiB / 12282MiB |      0%      Default |\n"
        "|                               |                      |                  N/A |\n"
        "+-------------------------------+----------------------+----------------------+\n"
    )
    assert not llamacpp.detect_llamacpp(text)
    facts = read_paste(text)
    assert facts.llamacpp == []
    assert [g.pci_bus_id for g in facts.gpus] == ["00000000:03:00.0"]


def test_a_build_line_without_its_compiler_line_is_not_llamacpp() -> None:
    # The older form is read only as llama.cpp printed it, the compiler on the next line.
    assert llamacpp._OLD_BUILD.search("main: build = 2406 (48358b2e)\n") is None
    assert llamacpp._OLD_BUILD.search(_NO_DEVICES_2023) is not None
