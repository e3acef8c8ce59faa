"""nvfancontrol's log, uv's driver detection, `modinfo -F version nvidia_NNN`, a Jetson's
L4T-numbered kernel module, TensorFlow 0.x's skip line, nouveau's chip, a mail-wrapped nvidia-smi
header, "(supports CUDA X.Y)" after a driver, and the prose that names a driver branch, a GPU a
tool reports or the writer uses, or a Jetson board with its JetPack; and the near misses that
must stay unread."""

from __future__ import annotations

import pytest

from checks.facts import capture, gpus
from checks.facts.model import HostFacts, Toolkit
from checks.facts.parsers import (
    driver_prose,
    env_list,
    gpu_prose,
    jetson_prose,
    kernel,
    nouveau,
    nvfancontrol,
    tf_devices,
    uv,
)
from checks.matrix import engine, host
from tests.conftest import FIXTURES
from tests.support.captures import read_paste

CAPTURES = FIXTURES / "corpus" / "captures"


def _capture(name: str) -> HostFacts:
    return gpus.enrich(capture.load([str(CAPTURES / name)]))


def test_nvfancontrol_names_the_driver_and_each_adapter_once() -> None:
    facts = _capture("nvfancontrol_debug_log__nvfancontrol-8_2x-gt650m-381.22.txt")
    assert facts.driver.version == "381.22"
    assert [(g.index, g.name, g.compute_capability) for g in facts.gpus] == [
        (None, "GeForce GT 650M", "3.0")
    ] * 2


def test_an_adapter_logged_by_a_second_run_is_the_same_adapter() -> None:
    # foucault/nvfancontrol#31 (Project0, 2021-04-19), its adapter lines pasted twice
    run = (
        "INFO - NVIDIA driver version: 465.24.02\n"
        "INFO - NVIDIA graphics adapter #0: NVIDIA GeForce GTX 1070\n"
        "INFO -   GPU #0 coolers: COOLER-0\n"
    )
    facts = nvfancontrol.parse_nvfancontrol(run + run)
    assert [g.name for g in facts.gpus] == ["NVIDIA GeForce GTX 1070"]


@pytest.mark.parametrize(
    ("printed", "driver"),
    [
        ("570.133.7", "570.133.07"),  # astral-sh/uv#14743
        ("550.144.3", "550.144.03"),  # astral-sh/uv#12070
        ("572.83", "572.83"),  # astral-sh/uv#12357
        ("581.80", "581.80"),  # astral-sh/uv#16651
    ],
)
def test_uv_prints_the_driver_without_its_zeros_and_it_is_read_with_them(
    printed: str, driver: str
) -> None:
    assert uv._padded(printed) == driver


def test_uv_reads_the_driver_of_its_debug_line() -> None:
    facts = _capture("uv_debug_nvidiactl_driver__uv-pr14743_570.133.07.txt")
    assert facts.driver.version == "570.133.07"


def test_modinfo_of_a_module_named_after_its_branch_is_the_modules_version() -> None:
    facts = _capture("modinfo_version_suffixed_module__cuda-smi-pr2_352.63.txt")
    assert facts.modules.nvidia_version == "352.63"
    assert facts.driver.version is None  # the module file installed, not the driver running


def test_a_jetsons_module_is_read_as_its_l4t_release_and_no_driver_rule_judges_it() -> None:
    facts = _capture("proc_version_open_aarch64_jetson__nixgl-139_orin-nx-35.3.1.txt")
    assert (facts.driver.kernel_module_version, facts.system.l4t_release) == ("35.3.1", "35.3.1")
    facts.toolkits = [Toolkit(path="/usr/local/cuda", version="12.8.93", release="12.8")]
    assert host.is_jetson(facts) and host.host_driver(facts) is None
    assert [f.rule for f in engine.evaluate(facts) if f.rule.startswith("DRV")] == []


@pytest.mark.parametrize(
    "banner",
    [
        # nix-community/nixGL#121 (shirok1, 2022-12-22): the open module on a desktop
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  525.60.11  Release Build"
        "  (archlinux-builder@localhost)  ",
        # JetPack 6's module: roboflow/inference, inference_experimental/tests/unit_tests/
        # runtime_introspection/test_core.py (a Jetson's /proc/driver/nvidia/version)
        "NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  540.4.0  Release Build"
        "  (buildbrain@mobile-u64-6336-d8000)  Tue Jan  7 17:35:12 PST 2025",
    ],
)
def test_a_module_numbered_as_a_driver_names_no_l4t_release(banner: str) -> None:
    assert kernel.parse_proc_version(banner + "\n").system.l4t_release is None


def test_tensorflow_0x_skip_line_wrapped_before_with_gives_name_and_capability() -> None:
    facts = _capture("tf_ignoring_gpu_indented__tensorflow-112_grid-k520.txt")
    assert [(g.name, g.compute_capability, g.pci_bus_id) for g in facts.gpus] == [
        ("GRID K520", "3.0", "0000:00:03.0")
    ]


def test_tensorflow_0x_skip_line_on_one_line() -> None:
    # tensorflow/tensorflow#4002 (cancan101, 2016-08-24)
    text = (
        "Ignoring gpu device (device: 0, name: GRID K520, pci bus id: 0000:00:03.0) with Cuda"
        " compute capability 3.0. The minimum required Cuda capability is 3.5.\n"
    )
    facts = tf_devices.parse_tf_devices(text)
    assert [(g.name, g.compute_capability) for g in facts.gpus] == [("GRID K520", "3.0")]


def test_tensorflow_0x_found_device_lines_tab_indented() -> None:
    # tensorflow/tensorflow#29 (graphific, 2015-11-09), cut to the device's lines
    text = (
        "\ttensorflow/core/common_runtime/gpu/gpu_init.cc:88] Found device 0 with properties:\n"
        "\tname: GRID K520\n"
        "\tmajor: 3 minor: 0 memoryClockRate (GHz) 0.797\n"
        "\tpciBusID 0000:00:03.0\n"
        "\tTotal memory: 4.00GiB\n"
        "\tFree memory: 3.95GiB\n"
        "\tI tensorflow/core/common_runtime/gpu/gpu_device.cc:611] Ignoring gpu device (device:"
        " 0, name: GRID K520, pci bus id: 0000:00:03.0) with Cuda compute capability 3.0. The"
        " minimum required Cuda capability is 3.5.\n"
    )
    facts = read_paste(text)
    assert [(g.name, g.compute_capability, g.pci_bus_id) for g in facts.gpus] == [
        ("GRID K520", "3.0", "0000:00:03.0")
    ]


def test_a_skip_line_the_console_wrapped_mid_word_keeps_the_device() -> None:
    # tensorflow/tensorflow#6125 (pragmascript, 2016-12-06): "Cuda c" / "ompute capability"
    text = (
        "I c:\\tf_jenkins\\home\\workspace\\release-win\\device\\gpu\\os\\windows\\tensorflow\\"
        "core\\common_runtime\\gpu\\gpu_device.cc:948] Ignoring visible gpu device (device: 0,"
        " name: GeForce GTX 660 Ti, pci bus id: 0000:01:00.0) with Cuda c\n"
        "ompute capability 3.0. The minimum required Cuda capability is 3.5.\n"
    )
    facts = read_paste(text)
    assert [(g.name, g.compute_capability) for g in facts.gpus] == [("GeForce GTX 660 Ti", "3.0")]


def test_nouveau_names_the_chip_and_its_capability() -> None:
    facts = _capture("dmesg_nouveau_chip_cmdline__negativo17-nvidia-driver-73_gm204.txt")
    assert [(g.name, g.compute_capability, g.architecture) for g in facts.gpus] == [
        ("NVIDIA GM204", "5.2", "Maxwell")
    ]
    assert facts.driver.version is None and facts.driver.kernel_module_version is None


def test_nouveau_through_the_journal_reads_no_gsp_firmware_as_a_driver() -> None:
    # NVIDIA/open-gpu-kernel-modules#1151 (eniac11), cut to nouveau's first lines
    text = (
        "May 28 11:59:54 fedora kernel: nouveau 0000:09:00.0: NVIDIA TU117 (167000a1)\n"
        "May 28 11:59:54 fedora kernel: nouveau 0000:09:00.0: gsp: RM version: 570.144\n"
        "May 28 11:59:54 fedora kernel: nouveau 0000:09:00.0: bios: version 90.17.3d.00.73\n"
    )
    facts = read_paste(text)
    assert [(g.name, g.compute_capability) for g in facts.gpus] == [("NVIDIA TU117", "7.5")]
    assert facts.driver.version is None


def test_nouveau_lines_without_a_chip_name_no_gpu() -> None:
    # geerlingguy/raspberry-pi-pcie-devices#26 (geerlingguy, 2024-10-30), cut
    text = (
        "[    8.449195] nouveau 0000:01:00.0: DRM: VRAM: 2048 MiB\n"
        "[    8.449204] nouveau 0000:01:00.0: DRM: GART: 1048576 MiB\n"
        "[    8.456760] nouveau 0000:01:00.0: DRM: failed to initialise sync subsystem, -22\n"
    )
    assert not nouveau.detect_nouveau(text)


def test_a_mail_wrapped_nvidia_smi_header_keeps_its_cuda_version() -> None:
    facts = _capture("nvsmi_email_wrapped_loop__aerial-framework-6_gb10-580.95.05.txt")
    assert (facts.driver.version, facts.driver.cuda_version) == ("580.95.05", "13.0")


def test_supports_cuda_after_a_driver_is_the_drivers_cuda() -> None:
    facts = _capture("env_bullets_query_csv__immich-28031_rtx5060ti-580.126.18.txt")
    assert (facts.driver.version, facts.driver.cuda_version) == ("580.126.18", "13.0")


def test_supports_cuda_as_a_range_is_a_requirement() -> None:
    # typed near miss: a requirement, the driver's minimum and a CUDA range
    text = "- **NVIDIA Driver**: Version 550+ (supports CUDA 12.4+)\n- GPU: RTX 4090\n"
    assert env_list.parse_env_list(text).driver.cuda_version is None


def test_the_summary_names_the_driver_and_the_gpu_a_tool_reports() -> None:
    facts = _capture("prose_env_section_gb10__morpheus-2328_gb10-580.142.txt")
    assert facts.driver.version == "580.142"
    assert [(g.name, g.compute_capability) for g in facts.gpus] == [("NVIDIA GB10", "12.1")]


def test_a_driver_given_as_an_example_is_no_fact() -> None:
    # nv-morpheus/Morpheus#2328 (kkristinsson, 2026-03-27): the Environment line alone
    text = "Environment\nDriver: 580.142 (example; attach your nvidia-smi output)\n"
    assert driver_prose.parse_driver_prose(text).driver.version is None


@pytest.mark.parametrize(
    ("text", "branch"),
    [
        # swc-17/SparseDrive#67 (wyanting314, 2024-10-24)
        (
            "I am trying to set up CUDA 11.6 with NVIDIA driver version 535 on Ubuntu 20.04,"
            " using an RTX 4060 Ti GPU. However, after installation, running nvidia-smi shows"
            " the following error:\n",
            "535",
        ),
        # ci-for-research/self-hosted-runners#40 (fdiblen, 2020-06-16)
        (
            "Nvidia driver (version 440) is already installed but when I run nvidia-smi command"
            " I get the following error.\n",
            "440",
        ),
    ],
)
def test_a_driver_branch_alone_is_read(text: str, branch: str) -> None:
    assert driver_prose.parse_driver_prose(text).driver.version == branch


@pytest.mark.parametrize(
    "text",
    [
        # Tencent/TPAT#32 (frankxyy, 2023-03-26): two machines, two branches
        "I think this is rtx3090 gpu.  The nvidia driver version 510.\n\nHowever, on another"
        " machine with `lspci | grep -i vga` command printed out: `37:00.0 VGA compatible"
        " controller: NVIDIA Corporation GA102 [GeForce RTX 3090] (rev a1)`, the onehot example"
        " can be run successfully (the nvidia driver version is 515).\n",
        # linuxmint/cinnamon#12341 (GuidoBartoli, 2024-08-06): a package offered, not in use
        "The tool shows `nvidia-driver-535` as the only recommended alternative to"
        " `xserver-xorg-video-nouveau`, so I check it and restart system.\n",
    ],
)
def test_branches_that_are_not_the_one_in_use_stay_unread(text: str) -> None:
    assert driver_prose.parse_driver_prose(text).driver.version is None


def test_the_gpu_the_writer_is_using_is_read() -> None:
    facts = _capture("prose_smi_failed_branches__sparsedrive-67_rtx4060ti.txt")
    assert (facts.driver.version, [(g.name, g.compute_capability) for g in facts.gpus]) == (
        "535",
        [("RTX 4060 Ti", "8.9")],
    )


@pytest.mark.parametrize(
    "text",
    [
        # typed near misses: no one of the writer's in the sentence, a recommendation
        "The benchmark was run using an RTX 2080 Ti GPU.\n",
        "For training we recommend using an A100 GPU.\n",
    ],
)
def test_a_gpu_used_by_no_one_in_particular_stays_unread(text: str) -> None:
    assert gpu_prose.parse_gpu_prose(text).gpus == []


@pytest.mark.parametrize(
    ("text", "board", "jetpack"),
    [
        # rbonghi/jetson_stats#608 (edmorson, 2025-02-21): an aside in brackets before the board
        (
            "jetson-stats (or any of jtop utils) does not run on Orin Jetpack 5.1\n",
            "Orin",
            "5.1",
        ),
        # rbonghi/jetson_stats#608, its title
        ("jtop not working on Orin with Jetpack 5.1\n", "Orin", "5.1"),
        # rbonghi/jetson_stats#504 (detruby, 2024-03-16)
        ("I am running jetpack 5.1.3 on Orin Nano.\n", "Orin Nano", "5.1.3"),
    ],
)
def test_a_jetson_board_beside_its_jetpack_is_read(text: str, board: str, jetpack: str) -> None:
    facts = jetson_prose.parse_jetson_prose(text)
    assert ([g.name for g in facts.gpus], facts.system.jetpack_release) == ([board], jetpack)


@pytest.mark.parametrize(
    "text",
    [
        # rbonghi/jetson_stats#495 (Jen-Hung-Ho, 2024-02-23): a misspelt board
        "Jetop not detect jetpack version 5.1.3 on Jetson Orion Nano\n",
        # rbonghi/jetson_stats#381 (pseyfert-sevensense): a board of another name, two JetPacks
        '"Error connection" on NVIDIA Orin Jetson-Small Developer Kit with jetpack 5.0 Pre-DP'
        " (factory setup) jetpack 4.1.5\n",
        # rbonghi/jetson_stats#608: the template's placeholders
        "* Module: [e.g. NVIDIA Jetson XXX]\n* Jetpack: [e.g. 4.3]\n* L4T: [e.g. 5.2.1]\n",
        # typed near misses: a plan, two boards
        "Please upgrade to JetPack 6.2 on Orin Nano\n",
        "Tested on Orin with JetPack 5.1 and on Xavier with JetPack 4.6\n",
    ],
)
def test_jetson_sentences_that_name_no_one_board_stay_unread(text: str) -> None:
    facts = jetson_prose.parse_jetson_prose(text)
    assert (facts.gpus, facts.system.jetpack_release) == ([], None)


def test_the_template_with_one_sentence_gives_the_board_and_jetpack() -> None:
    facts = _capture("jetson_release_template_unfilled__jetson-stats-608_orin-jp5.1.txt")
    assert [(g.name, g.compute_capability) for g in facts.gpus] == [("Orin", "8.7")]
    assert (facts.system.jetpack_release, facts.system.l4t_release) == ("5.1", None)
