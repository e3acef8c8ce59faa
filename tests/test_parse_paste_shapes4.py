"""Paste shapes from capture set 4: ComfyUI, inxi, LM Studio, ubuntu-drivers, neofetch, dpkg -l
without the driver's row, nvidia-container-cli's debug lines and jetson-stats' "6.0 DP".

Each text is real (the thread it comes from is named beside it); each near miss is text of the
same shape that must give nothing, or less.
"""

from __future__ import annotations

from checks.facts.model import HostFacts
from checks.facts.parsers import (
    comfyui,
    containers,
    inxi,
    jetson,
    lmstudio,
    neofetch,
    packages,
    ubuntu_drivers,
)


def _names(facts: HostFacts) -> list[str | None]:
    return [gpu.name for gpu in facts.gpus]


# --- ComfyUI -----------------------------------------------------------------------------------

# Tavris1/ComfyUI-Easy-Install#114 (description by essence25): start-up lines.
COMFY_STARTUP = """Checkpoint files will always be loaded safely.
Total VRAM 32607 MB, total RAM 60985 MB
pytorch version: 2.9.1+cu130
Set vram state to: NORMAL_VRAM
Device: cuda:0 NVIDIA GeForce RTX 5090 : native
Using async weight offloading with 2 streams
"""
# Comfy-Org/ComfyUI#11186 (description by Wapwray, 2025-12-08): the error report's sections.
COMFY_REPORT = """## System Information
- **ComfyUI Version:** 0.3.76
- **OS:** nt
- **PyTorch Version:** 2.8.0+cu129
## Devices

- **Name:** cuda:0 NVIDIA GeForce RTX 5090 : cudaMallocAsync
  - **Type:** cuda
  - **VRAM Total:** 34190458880
  - **VRAM Free:** 32429309952
"""


def test_comfyui_startup_names_the_device_its_memory_and_torch() -> None:
    facts = comfyui.parse_comfyui(COMFY_STARTUP)
    assert comfyui.detect_comfyui(COMFY_STARTUP)
    assert [(g.index, g.name, g.memory_total_mib) for g in facts.gpus] == [
        (0, "NVIDIA GeForce RTX 5090", 32607)
    ]
    assert [(p.name, p.version, p.cuda_version) for p in facts.python] == [
        ("torch", "2.9.1+cu130", "13.0")
    ]


def test_comfyui_report_reads_the_devices_section_with_vram_in_bytes() -> None:
    facts = comfyui.parse_comfyui(COMFY_REPORT)
    assert [(g.index, g.name, g.memory_total_mib) for g in facts.gpus] == [
        (0, "NVIDIA GeForce RTX 5090", 32607)  # 34190458880 bytes
    ]
    assert facts.python[0].cuda_version == "12.9"


def test_comfyui_log_timestamp_prefix_is_read() -> None:
    line = "2025-12-08T20:52:51.019405 - Device: cuda:0 NVIDIA GeForce RTX 5090 : cudaMallocAsync\n"
    assert _names(comfyui.parse_comfyui(line)) == ["NVIDIA GeForce RTX 5090"]


def test_comfyui_near_misses_give_nothing() -> None:
    # ZLUDA and ROCm builds also call their device cuda:0 (ComfyUI-Zluda's model_management.py).
    zluda = COMFY_STARTUP.replace("NVIDIA GeForce RTX 5090", "AMD Radeon RX 6800 [ZLUDA]")
    cpu = COMFY_STARTUP.replace("cuda:0 NVIDIA GeForce RTX 5090 : native", "cpu")
    prose = "Device: my NVIDIA GeForce RTX 5090 : it crashed\n"
    for text in (zluda, cpu, prose):
        assert not comfyui.detect_comfyui(text)
        assert comfyui.parse_comfyui(text) == HostFacts()


# --- inxi --------------------------------------------------------------------------------------

# smxi/inxi#191 (description by xPrzybyLx, 2019-08-27): inxi -Gx, one line per item.
INXI_ONE_LINE = """Graphics:  Device-1: NVIDIA GP104 [GeForce GTX 1080] vendor: ASUSTeK driver: nvidia v: 430.40 bus ID: 01:00.0
           Display: server: X.Org 1.20.4 driver: nouveau,vesa FAILED: nvidia unloaded: fbdev,modesetting
           OpenGL: renderer: GeForce GTX 1080/PCIe/SSE2 v: 4.6.0 NVIDIA 430.40 direct render: Yes
"""  # noqa: E501
# smxi/sgfxi#67 (comment by smxi, 2022-05-31): inxi 3.3.16 -G, wrapped items.
INXI_WRAPPED = """Graphics:
  Device-1: Intel CometLake-H GT2 [UHD Graphics] vendor: Lenovo
    driver: i915 v: kernel ports: active: eDP-1 empty: none bus-ID: 00:02.0
    chip-ID: 8086:9bc4 class-ID: 0300
  Device-2: NVIDIA TU116M [GeForce GTX 1660 Ti Mobile] vendor: Lenovo
    driver: nvidia v: 515.43.04 alternate: nouveau,nvidia_drm
    non-free: 515.xx+ status: current (as of 2022-05) arch: Turing pcie:
    active: none empty: DP-1,HDMI-A-1,eDP-2 bus-ID: 01:00.0
    chip-ID: 10de:2191 class-ID: 0300
"""
# linuxmint/mint22-beta#7 (description, 2024-06-30): the item quoted inside prose.
INXI_QUOTED = """First line of the the INXI report shows: "Graphics:
  Device-1: NVIDIA GA107 [GeForce RTX 3050 6GB] vendor: Micro-Star MSI driver: nvidia v: 550.90.07"
Looking in the INXI report there is no reference to the word "VGA"
"""


def test_inxi_one_line_form() -> None:
    facts = inxi.parse_inxi(INXI_ONE_LINE)
    assert [(g.name, g.pci_bus_id) for g in facts.gpus] == [("GP104 [GeForce GTX 1080]", "01:00.0")]
    assert facts.driver.kernel_module_version == "430.40"


def test_inxi_wrapped_form_skips_the_igpu_and_reads_continuation_lines() -> None:
    facts = inxi.parse_inxi(INXI_WRAPPED)
    assert [(g.name, g.pci_bus_id, g.pci_device_id) for g in facts.gpus] == [
        ("TU116M [GeForce GTX 1660 Ti Mobile]", "01:00.0", "10de:2191")
    ]
    assert facts.driver.kernel_module_version == "515.43.04"


def test_inxi_quoted_in_prose() -> None:
    facts = inxi.parse_inxi(INXI_QUOTED)
    assert _names(facts) == ["GA107 [GeForce RTX 3050 6GB]"]
    assert facts.driver.kernel_module_version == "550.90.07"


def test_inxi_near_misses() -> None:
    # The GPU's HDMI audio function is an NVIDIA device of the Audio section.
    audio = INXI_WRAPPED.replace("Graphics:", "Audio:")
    nouveau = INXI_ONE_LINE.replace("driver: nvidia v: 430.40", "driver: nouveau v: kernel")
    assert not inxi.detect_inxi(audio) and inxi.parse_inxi(audio) == HostFacts()
    assert not inxi.detect_inxi(INXI_WRAPPED.replace("NVIDIA TU116M", "AMD Navi 23"))
    facts = inxi.parse_inxi(nouveau)
    assert _names(facts) == ["GP104 [GeForce GTX 1080]"]
    assert facts.driver.kernel_module_version is None
    cut = "Graphics:\n  Device-1: NVIDIA GA107 [GeForce RTX 30"
    assert _names(inxi.parse_inxi(cut)) == [None]


# --- LM Studio ---------------------------------------------------------------------------------

# lmstudio-ai/lmstudio-bug-tracker#334 (comment by tecno14, 2025-01-31): cut in the GPU object.
LMS_SURVEY = """        "gpuSurveyResult": {
          "result": {
            "code": "Success",
            "message": ""
          },
          "gpuInfo": [
            {
              "name": "Quadro P1000",
              "deviceId": 0,
              "totalMemoryCapacityBytes": 4294705152,
"""
# lmstudio-ai/lmstudio-bug-tracker#62 (description by peter-ch, 2024-07-23): 0.2.27 system info.
LMS_SYSINFO = """  "gpu": {
    "gpu_names": [
      "NVIDIA GeForce RTX 2080 Ti",
      "NVIDIA GeForce GTX 1080"
    ],
    "vram_recommended_capacity": "19.00 GB",
    "vram_unused": "16.89 GB"
  },
"""


def test_lmstudio_survey_and_system_info() -> None:
    assert _names(lmstudio.parse_lmstudio(LMS_SURVEY)) == ["Quadro P1000"]
    assert _names(lmstudio.parse_lmstudio(LMS_SYSINFO)) == [
        "NVIDIA GeForce RTX 2080 Ti",
        "NVIDIA GeForce GTX 1080",
    ]


def test_lmstudio_lists_each_gpu_once_across_survey_results() -> None:
    closed = LMS_SURVEY + "            }\n          ]\n        }\n"
    assert _names(lmstudio.parse_lmstudio(closed + closed)) == ["Quadro P1000"]


def test_lmstudio_near_misses() -> None:
    amd = LMS_SURVEY.replace("Quadro P1000", "AMD Radeon RX 7900 XTX")
    empty = '"gpuSurveyResult": {"gpuInfo": []}, "model": {"name": "NVIDIA-Nemotron"}'
    other_json = LMS_SYSINFO.replace('"vram_recommended_capacity"', '"vram"').replace(
        '"vram_unused"', '"free"'
    )
    for text in (amd, empty, other_json):
        assert not lmstudio.detect_lmstudio(text)
        assert lmstudio.parse_lmstudio(text) == HostFacts()


# --- ubuntu-drivers ----------------------------------------------------------------------------

# canonical/ubuntu-drivers-common#48 (description by follower, 2020-10-31).
UBUNTU_DRIVERS = """== /sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0 ==
modalias : pci:v000010DEd000011C6sv00003842sd00003059bc03sc00i00
vendor   : NVIDIA Corporation
model    : GK106 [GeForce GTX 650 Ti]
driver   : nvidia-driver-450-server - distro non-free recommended
driver   : xserver-xorg-video-nouveau - distro free builtin
"""
# NVIDIA/open-gpu-kernel-modules#872 (comment by Reneanscen, 2025-06-26): no model line.
UBUNTU_DRIVERS_NO_MODEL = """== /sys/devices/pci0000:00/0000:00:06.0/0000:02:00.0 ==
modalias : pci:v000010DEd00002C58sv0000103Csd00008D41bc03sc00i00
vendor : NVIDIA Corporation
driver : nvidia-driver-570 - distro non-free recommended
"""


def test_ubuntu_drivers_reads_model_and_id_but_no_driver() -> None:
    facts = ubuntu_drivers.parse_ubuntu_drivers(UBUNTU_DRIVERS)
    assert [(g.name, g.pci_bus_id, g.pci_device_id) for g in facts.gpus] == [
        ("GK106 [GeForce GTX 650 Ti]", "0000:01:00.0", "10de:11c6")
    ]
    assert facts.driver.version is None and facts.driver.kernel_module_version is None


def test_ubuntu_drivers_without_model_gives_a_nameless_gpu() -> None:
    facts = ubuntu_drivers.parse_ubuntu_drivers(UBUNTU_DRIVERS_NO_MODEL)
    assert [(g.name, g.pci_device_id) for g in facts.gpus] == [(None, "10de:2c58")]


def test_ubuntu_drivers_near_misses() -> None:
    audio = UBUNTU_DRIVERS.replace("bc03sc00", "bc04sc03")  # the GPU's HDMI audio function
    amd = UBUNTU_DRIVERS.replace("v000010DE", "v00001002")
    no_header = UBUNTU_DRIVERS.split("\n", 1)[1]
    for text in (audio, amd, no_header):
        assert ubuntu_drivers.parse_ubuntu_drivers(text) == HostFacts()
    assert not ubuntu_drivers.detect_ubuntu_drivers(no_header)


# --- neofetch ----------------------------------------------------------------------------------

# dylanaraps/neofetch#876 (description by techtonik, 2017-12-03): the summary, pasted twice.
NEOFETCH = """```
   /ssssssssssshdmNNNNmyNMMMMhssssss/      GPU: NVIDIA GeForce GT 520
    .ossssssssssssssssssdMMMNysssso.       Memory: 1583MiB / 7979MiB
      -+sssssssssssssssssyyyssss+-         GPU Driver: nvidia
```
What I expected to see is exact driver version in GPU line:
```
   /ssssssssssshdmNNNNmyNMMMMhssssss/      GPU: NVIDIA GeForce GT 520 (384.98)
    .ossssssssssssssssssdMMMNysssso.       Memory: 1583MiB / 7979MiB
```
"""


def test_neofetch_reads_the_first_run_of_gpu_lines() -> None:
    assert _names(neofetch.parse_neofetch(NEOFETCH)) == ["NVIDIA GeForce GT 520"]


def test_neofetch_near_misses() -> None:
    fastfetch = "GPU: NVIDIA GeForce RTX 3060 [Discrete]\nMemory: 5.06 GiB / 31.27 GiB (16%)\n"
    amd = NEOFETCH.replace("NVIDIA GeForce GT 520", "AMD ATI Radeon RX 580")
    for text in (fastfetch, amd):
        assert not neofetch.detect_neofetch(text)
        assert neofetch.parse_neofetch(text) == HostFacts()


# --- dpkg -l without the driver's row ----------------------------------------------------------

# NVIDIA/nvidia-docker#1637 (description by tkhan3): cut before libnvidia-compute.
DPKG_CUT = """ii  libnvidia-cfg1-470:amd64            470.103.01-0ubuntu0.20.04.1 amd64        NVIDIA binary OpenGL/GLX configuration library
un  libnvidia-cfg1-any                  <none>                      <none>       (no description available)
ii  libnvidia-common-455                460.91.03-0ubuntu0.20.04.1  all          Transitional package for libnvidia-common-460
ii  libnvidia-common-460                470.103.01-0ubuntu0.20.04.1 all          Transitional package for libnvidia-common-470
"""  # noqa: E501
# NVIDIA/nvidia-docker#1506 (description by ethanabrooks): every compute row is "rc".
DPKG_RC = """ii  libnvidia-cfg1-465:amd64       465.19.01-0ubuntu1   amd64                NVIDIA binary OpenGL/GLX configuration library
ii  libnvidia-common-465           465.19.01-0ubuntu1   all                  Shared files used by the NVIDIA libraries
rc  libnvidia-compute-418:amd64    418.67-0ubuntu1      amd64                NVIDIA libcompute package
rc  libnvidia-compute-460:amd64    460.73.01-0ubuntu1   amd64                NVIDIA libcompute packag
"""  # noqa: E501


def test_dpkg_branch_packages_give_the_driver() -> None:
    assert packages.detect_packages(DPKG_CUT) and packages.detect_packages(DPKG_RC)
    assert packages.parse_packages(DPKG_CUT).driver.version == "470.103.01"
    assert packages.parse_packages(DPKG_RC).driver.version == "465.19.01"


def test_dpkg_transitional_and_removed_packages_are_not_the_driver() -> None:
    transitional = DPKG_CUT.split("\n", 2)[2]  # only the 455 and 460 transitional rows
    removed = DPKG_RC.replace("ii  ", "rc  ")
    for text in (transitional, removed):
        assert not packages.detect_packages(text)
        assert packages.parse_packages(text).driver.version is None
    # Two branches installed side by side: which one is loaded is not known.
    two = DPKG_RC + DPKG_CUT.split("\n", 1)[0] + "\n"
    assert packages.parse_packages(two).driver.version is None


# --- nvidia-container-cli -d -------------------------------------------------------------------

# NVIDIA/nvidia-docker#1060 (comment by tongchao199): cut before "NVRM version:".
NVC_DEBUG = """  I1225 03:31:09.421667 1885 nvc_info.c:433] requesting driver information with ''
  I1225 03:31:09.423306 1885 nvc_info.c:147] selecting /usr/lib64/vdpau/libvdpau_nvidia.so.418.67
  I1225 03:31:09.423932 1885 nvc_info.c:147] selecting /usr/lib64/libnvidia-tls.so.418.67
  I1225 03:31:09.425863 1885 nvc_info.c:147] selecting /usr/li
"""


def test_container_cli_debug_lines_name_the_driver() -> None:
    assert containers.detect_container_cli_debug(NVC_DEBUG)
    assert containers.parse_container_cli_debug(NVC_DEBUG).driver.version == "418.67"


def test_container_cli_debug_near_misses() -> None:
    compat = NVC_DEBUG.replace("/usr/lib64/", "/usr/local/cuda/compat/").replace("tls", "x")
    mixed = NVC_DEBUG + NVC_DEBUG.replace("418.67", "470.57.02")
    listing = "/usr/lib64/libnvidia-tls.so.418.67\n"  # an ls, not the tool's choice
    for text in (compat, mixed, listing):
        assert not containers.detect_container_cli_debug(text)
        assert containers.parse_container_cli_debug(text).driver.version is None


# --- jetson-stats ------------------------------------------------------------------------------

# rbonghi/jetson_stats#476 (description by joaocalen, 2023-12-14): "Hardware Missing" form.
JTOP = """ - Model: NVIDIA Jetson AGX Orin Developer Kit
 - CUDA Arch BIN: 8.7
 - L4T: 36.2.0
 - Jetpack: 6.0 DP
"""


def test_jetpack_developer_preview_is_kept_whole() -> None:
    system = jetson.parse_jetson_release(JTOP).system
    assert (system.l4t_release, system.jetpack_release) == ("36.2.0", "6.0 DP")
    other = jetson.parse_jetson_release(JTOP.replace("6.0 DP", "6.0 DPX")).system
    assert other.jetpack_release is None
