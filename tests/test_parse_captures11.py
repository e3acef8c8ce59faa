"""The shapes capture set 11 read: `nvidia-smi -q` through grep, OpenCL programs' device listings,
hashcat's backend reports and session device lists, nvtop's screen as text, and `rpm -qa`; and
the near misses beside them that must stay unread."""

from __future__ import annotations

import pytest

from checks.facts.parsers import clinfo, env_list, hashcat, nvidia_smi, nvtop, packages
from tests.support.captures import capture_text, gpu_names

# --- nvidia-smi -q | grep ------------------------------------------------------------------------

GREP = "$ nvidia-smi -q | grep -E 'Driver Version|Product Name|Device Id'\n"


def test_grepped_query_lines_name_the_gpu_and_its_pci_id() -> None:
    facts = nvidia_smi.parse_query_grep(capture_text("nvsmi_q_grep__mig-parted-120_h200.txt"))
    assert gpu_names(facts) == ["NVIDIA H200"]
    assert facts.gpus[0].pci_device_id == "10de:2335"
    assert facts.driver.version is None


def test_grepped_query_lines_give_each_gpu_its_own_id_and_the_driver() -> None:
    text = GREP + (
        "Driver Version                            : 550.90.07\n"
        "    Product Name                          : NVIDIA A100-SXM4-80GB\n"
        "        Device Id                         : 0x20B210DE\n"
        "    Product Name                          : NVIDIA A100-SXM4-80GB\n"
        "        Device Id                         : 0x20B210DE\n"
    )
    facts = nvidia_smi.parse_query_grep(text)
    assert facts.driver.version == "550.90.07"
    assert [g.pci_device_id for g in facts.gpus] == ["10de:20b2", "10de:20b2"]


def test_a_vgpu_guests_licensed_product_is_no_gpu() -> None:
    text = "$ nvidia-smi -q | grep 'Product Name'\n" + (
        "    Product Name                          : NVIDIA A100-PCIE-40GB\n"
        "        Product Name                      : NVIDIA Virtual Compute Server\n"
    )
    assert gpu_names(nvidia_smi.parse_query_grep(text)) == ["NVIDIA A100-PCIE-40GB"]


@pytest.mark.parametrize(
    "text",
    [
        # grep -A2 keeps the heading, which has no value: not grep'd "key : value" lines
        "$ nvidia-smi -q | grep -A2 'vGPU Software Licensed Product'\n"
        "    vGPU Software Licensed Product\n"
        "        Product Name                      : NVIDIA Virtual Compute Server\n",
        # awk rewrites the lines
        "$ nvidia-smi -q | grep 'Product Name' | awk -F: '{print $2}'\n"
        "    Product Name                          : NVIDIA H200\n",
        # not nvidia-smi -q
        "$ nvidia-smi | grep 'Product Name'\n    Product Name : NVIDIA H200\n",
        # the command only, its output elsewhere after other text
        "Run `nvidia-smi -q | grep 'Product Name'` and then:\nProduct Name : NVIDIA H200\n",
        "$ nvidia-smi -q | grep 'Device Id'\n        Device Id : 0x233510DE\n",  # no GPU to own it
    ],
)
def test_other_greps_and_pipelines_stay_unread(text: str) -> None:
    facts = nvidia_smi.parse_query_grep(text)
    assert not facts.gpus and facts.driver.version is None


def test_a_device_id_of_another_vendor_is_not_read() -> None:
    text = GREP + "    Product Name : NVIDIA H200\n        Device Id : 0x74A11002\n"
    assert nvidia_smi.parse_query_grep(text).gpus[0].pci_device_id is None


def test_full_query_output_is_left_to_its_own_parser() -> None:
    text = GREP.replace(" | grep -E 'Driver Version|Product Name|Device Id'", "") + (
        "==============NVSMI LOG==============\n\nDriver Version : 550.90.07\n\n"
        "GPU 00000000:01:00.0\n    Product Name : NVIDIA H200\n"
    )
    assert not nvidia_smi._detect_query_grep(text)


# --- OpenCL device listings ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "driver", "gpus"),
    [
        (
            "opencl_enumdevices_intel__gpgpu2023-5_rtx2060-535.104.05.txt",
            "535.104.05",
            ["NVIDIA GeForce RTX 2060"],
        ),
        (
            "opencl_enumdevices_tabs__gpgpu2023-56_gtx1650-525.125.06.txt",
            "525.125.06",
            ["NVIDIA GeForce GTX 1650"],
        ),
        (
            "opencl_enumdevices_ci__gpgpu2026-68_v100-580.95.05.txt",
            "580.95.05",
            ["Tesla V100-SXM2-16GB", None, None, None],
        ),
        (
            "opencl_enumdevices_ci_tabs__gpgpu2026-87_v100-cut.txt",
            None,
            ["Tesla V100-SXM2-16GB"] * 3 + [None],
        ),
    ],
)
def test_an_opencl_listing_names_nvidias_devices_and_driver(
    name: str, driver: str | None, gpus: list[str | None]
) -> None:
    text = capture_text(name)
    assert clinfo.detect_opencl_listing(text)
    facts = clinfo.parse_opencl_listing(text)
    assert facts.driver.version == driver
    assert gpu_names(facts) == gpus


def test_the_listings_device_lines_are_not_read_again_as_a_typed_list() -> None:
    text = capture_text("opencl_enumdevices_ci_tabs__gpgpu2026-87_v100-cut.txt")
    assert not env_list.parse_env_list(text).gpus


INTEL_ONLY = """Number of OpenCL platforms: 1
Platform #1/1
    Platform name: Intel(R) OpenCL Graphics
    Platform vendor: Intel(R) Corporation
    Device #1/1
        Device name: Intel(R) UHD Graphics 630
        Driver version: 23.22.26516
"""


@pytest.mark.parametrize(
    "text",
    [
        INTEL_ONLY,
        INTEL_ONLY.replace("Intel(R) UHD Graphics 630", "NVIDIA GeForce RTX 2060"),  # not NVIDIA's
        # NVIDIA's platform, then the next platform's devices
        "Number of OpenCL platforms: 2\nPlatform #1/2\n    Platform name: NVIDIA CUDA\n"
        + INTEL_ONLY.split("\n", 1)[1].replace("Platform #1/1", "Platform #2/2"),
        # no listing header: a clinfo-like key alone is not this format
        "Platform name: NVIDIA CUDA\nDevice name: NVIDIA GeForce RTX 2060\n",
    ],
)
def test_devices_and_drivers_of_other_platforms_stay_unread(text: str) -> None:
    facts = clinfo.parse_opencl_listing(text) if clinfo.detect_opencl_listing(text) else None
    assert facts is None or (not facts.gpus and facts.driver.version is None)


def test_a_listing_driver_of_another_shape_is_not_read() -> None:
    text = (
        "Number of OpenCL platforms: 1\nPlatform #1/1\n    Platform name: NVIDIA CUDA\n"
        "    Device name: NVIDIA GeForce RTX 2060\n    Driver version: 3444.0 (PAL,HSAIL)\n"
    )
    assert clinfo.parse_opencl_listing(text).driver.version is None


# --- hashcat -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "driver", "cuda", "gpus"),
    [
        (
            "hashcat_I__hashcat-pr4240_rtx4080-cuda12.5.txt",
            None,
            "12.5",
            ["NVIDIA GeForce RTX 4080"],
        ),
        (
            "hashcat_I_cuda_opencl__kali-docs-nvidia_gtx1060-440.100.txt",
            "440.100",
            "10.2",
            ["GeForce GTX 1060 6GB"],
        ),
    ],
)
def test_hashcat_backend_info_reads_cuda_devices_once(
    name: str, driver: str | None, cuda: str, gpus: list[str]
) -> None:
    text = capture_text(name)
    assert hashcat.detect_backend_info(text)
    facts = hashcat.parse_backend_info(text)
    assert (facts.driver.version, facts.driver.cuda_version, gpu_names(facts)) == (
        driver,
        cuda,
        gpus,
    )


OPENCL_ONLY = """hashcat (v5.1.0) starting...

OpenCL Info:

Platform ID #1
  Vendor  : NVIDIA Corporation
  Name    : NVIDIA CUDA
  Version : OpenCL 1.2 CUDA 10.1.120

  Device ID #1
    Type           : GPU
    Vendor ID      : 32
    Vendor         : NVIDIA Corporation
    Name           : GeForce GTX 1080
    Driver Version : 418.56

Platform ID #2
  Vendor  : Intel(R) Corporation
  Name    : Intel(R) OpenCL

  Device ID #2
    Type           : CPU
    Name           : Intel(R) Core(TM) i7-7700K CPU @ 4.20GHz
    Driver Version : 18.1.0.0920
"""


def test_without_a_cuda_section_nvidias_opencl_platform_gives_the_devices() -> None:
    facts = hashcat.parse_backend_info(OPENCL_ONLY)
    assert gpu_names(facts) == ["GeForce GTX 1080"]
    assert (facts.driver.version, facts.driver.cuda_version) == ("418.56", "10.1")


def test_a_hip_or_intel_device_is_never_read() -> None:
    text = OPENCL_ONLY.replace("NVIDIA Corporation", "Advanced Micro Devices, Inc.")
    facts = hashcat.parse_backend_info(text)
    assert not facts.gpus and facts.driver.version is None and facts.driver.cuda_version is None
    hip = capture_text("hashcat_I__hashcat-pr4240_rtx4080-cuda12.5.txt")
    assert "AMD Radeon RX 6900 XT" not in gpu_names(hashcat.parse_backend_info(hip))


def test_hashcat_machine_readable_report_reads_its_cuda_object_only() -> None:
    facts = hashcat.parse_backend_json(
        capture_text("hashcat_II_json__hashcat-pr4271_rtx4080-cuda12.5.txt")
    )
    assert (facts.driver.cuda_version, gpu_names(facts)) == ("12.5", ["NVIDIA GeForce RTX 4080"])
    assert not hashcat.detect_backend_json('{ "HIPInfo": { "Version": "6.3", "BackendDevices": [')


def test_a_session_lists_the_cuda_devices_and_skips_aliases_and_other_platforms() -> None:
    facts = hashcat.parse_session(capture_text("hashcat6_session__hashcat-2473_rtx2060.txt"))
    assert (facts.driver.cuda_version, gpu_names(facts)) == ("10.2", ["GeForce RTX 2060"])
    old = hashcat.parse_session(capture_text("hashcat4_session__hashcat-1533_gt710.txt"))
    assert (old.driver.cuda_version, gpu_names(old)) == (None, ["GeForce GT 710"])


@pytest.mark.parametrize(
    "text",
    [
        # a device's warning, not the list under a heading
        "hashcat (v6.2.5) starting\n\n* Device #1: WARNING! Kernel exec timeout is not disabled.\n",
        # the list under another vendor's platform
        "hashcat (v6.1.1) starting...\n\n"
        "OpenCL API (OpenCL 2.1 ) - Platform #1 [Intel(R) Corporation]\n"
        "=============================================================\n"
        "* Device #1: Intel(R) Gen9 HD Graphics NEO, 12679/12743 MB, 24MCU\n",
        # the heading without its underline: a benchmark's text rendered as markdown
        "hashcat (v6.1.1) starting in benchmark mode...\n\nCUDA API (CUDA 11.3)\n\n"
        "* Device #1: NVIDIA GeForce GTX 1660 Ti, 5163/6144 MB, 24MCU\n",
        # not hashcat's output: no start line
        "CUDA API (CUDA 11.3)\n====================\n"
        "* Device #1: NVIDIA GeForce GTX 1660 Ti, 1 MB\n",
    ],
)
def test_other_device_lines_stay_unread(text: str) -> None:
    facts = hashcat.parse_session(text) if hashcat.detect_session(text) else None
    assert facts is None or (not facts.gpus and facts.driver.cuda_version is None)


# --- nvtop ---------------------------------------------------------------------------------------


def test_nvtop_headers_give_every_known_gpu_with_its_device_number() -> None:
    facts = nvtop.parse_nvtop(capture_text("nvtop_inline__comfyui-6778_4x-rtx4090.txt"))
    assert [(g.index, g.name) for g in facts.gpus] == [
        (i, "NVIDIA GeForce RTX 4090") for i in range(4)
    ]


def test_nvtop_leaves_an_integrated_amd_gpu_out() -> None:
    facts = nvtop.parse_nvtop(capture_text("nvtop_tty__nvtop-243_rtx3060-laptop-amd-igpu.txt"))
    assert [(g.index, g.name) for g in facts.gpus] == [(0, "NVIDIA GeForce RTX 3060 Laptop GPU")]


@pytest.mark.parametrize(
    "text",
    [
        " Device 0 [AMD Radeon RX 7900 XTX] PCIe GEN 4@16x RX: 1.000 MiB/s TX: 1.000 MiB/s\n",
        " Device 1 [AMD Radeon Graphics]                Integrated GPU RX: N/A TX: N/A\n",
        "Device 0 [NVIDIA GeForce RTX 4090] is missing\n",  # no PCIe link after the name
        "Device 0 [GeForce GTX 1080 Ti] _**PCIe GEN 1@16x**_\n",  # markdown between
    ],
)
def test_other_device_headers_stay_unread(text: str) -> None:
    assert not nvtop.parse_nvtop(text).gpus


def test_every_new_reader_survives_garbage() -> None:
    garbage = (
        "Device 0 [" * 2000
        + "| grep " * 2000
        + "Number of OpenCL platforms: " * 500
        + "rpm -q a-" * 2000
    )
    for parse in (
        nvidia_smi.parse_query_grep,
        clinfo.parse_opencl_listing,
        hashcat.parse_backend_info,
        hashcat.parse_backend_json,
        hashcat.parse_session,
        nvtop.parse_nvtop,
        packages.parse_packages,
    ):
        parse(garbage)


# --- rpm -qa -------------------------------------------------------------------------------------


def test_rpm_qa_below_its_command_gives_the_driver_packages_version() -> None:
    facts = packages.parse_packages(
        capture_text("rpm_qa_cuda_nvml_mismatch__az-hop-269_465.19.01.txt")
    )
    assert facts.driver.version == "465.19.01"
    assert not facts.toolkits  # no cuda-nvcc package in the list


@pytest.mark.parametrize(
    "text",
    [
        # no rpm command above the lines
        "Removed:\n  cuda-drivers-465.19.01-1.x86_64\n",
        # dnf's transaction lists print the epoch; rpm -qa never does
        "$ rpm -qa | grep nvidia\nnvidia-driver-latest-dkms-3:465.19.01-1.el7.x86_64\n",
        # package files, not installed packages
        "$ rpm -qa | grep nvidia\n"
        "[SKIPPED] nvidia-driver-cuda-libs-470.57.02-1.el8.x86_64.rpm: Already downloaded\n",
        # a kernel module package is not the userspace driver
        "# rpm -q kmod-nvidia\nkmod-nvidia-550.67-1.8.el8.x86_64\n",
    ],
)
def test_other_rpm_lines_give_no_driver(text: str) -> None:
    assert packages.parse_packages(text).driver.version is None
