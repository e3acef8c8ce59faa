"""The shapes capture set 16 read: the CUDA samples' device lines (nbody, findCudaDevice), macOS's
system_profiler and "Graphics:" lines, a one-column `--query-gpu=uuid` CSV, issue-form bullets
("rtx3090 (x2)", "RTX 3060Ti", "RTX 3050 6GB"), a driver or a GPU named in a sentence as the
writer's own, and catalogue entries for old and odd boards; and the near misses that must stay
unread."""

from __future__ import annotations

import pytest

from checks.facts import gpus
from checks.facts.model import HostFacts
from checks.facts.parsers import (
    cuda_samples,
    driver_prose,
    env_list,
    gpu_prose,
    macos,
    nvidia_smi,
)
from tests.support.captures import capture_text, read_capture, read_paste


def _gpus(facts: HostFacts) -> list[tuple[int | None, str | None, str | None]]:
    return [(g.index, g.name, g.compute_capability) for g in facts.gpus]


# --- the CUDA samples' device lines ---------------------------------------------------------------

# NVIDIA/cuda-samples#65 (AaronFriel, 2021-01-30): a sample built before CUDA 11 names the GPU.
_NBODY_OLD = (
    "> 1 Devices used for simulation\n"
    "MapSMtoCores for SM 8.6 is undefined.  Default to use 64 Cores/SM\n"
    'GPU Device 0: "GeForce RTX 3090" with compute capability 8.6\n'
)
# SthPhoenix/InsightFace-REST#58 (bltcn, 2021-11-04): the architecture in its place, nbody's own
# line with the name.
_NBODY_ARCH = (
    "> 1 Devices used for simulation\n"
    'GPU Device 0: "Pascal" with compute capability 6.1\n'
    "\n"
    "> Compute 6.1 CUDA device: [NVIDIA GeForce GTX 1060]\n"
    "10240 bodies, total time for 10 iterations: 8.868 ms\n"
    "= 118.245 billion interactions per second\n"
)
# harvester/docs#1135 (jillian-maroket, review thread, 2026-09-17; a diff, cut): a helper that
# does not know 8.9 names the architecture before it, "Ampere".
_NBODY_DIFF = (
    "+> 1 Devices used for simulation\n"
    "+MapSMtoCores for SM 8.9 is undefined.  Default to use 128 Cores/SM\n"
    "+MapSMtoArchName for SM 8.9 is undefined.  Default to use Ampere\n"
    '+GPU Device 0: "Ampere" with compute capability 8.9\n'
    "+\n"
    "+> Compute 8.9 CUDA device: [NVIDIA L4]\n"
    "+59392 bodies, total time for 10 iterations: 56.420 ms\n"
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (_NBODY_OLD, [(0, "GeForce RTX 3090", "8.6")]),
        (_NBODY_ARCH, [(0, "NVIDIA GeForce GTX 1060", "6.1")]),
        (_NBODY_DIFF, [(0, "NVIDIA L4", "8.9")]),
        (_NBODY_ARCH.replace("> Compute", "> Other"), [(0, None, "6.1")]),  # no name but the arch
    ],
)
def test_the_samples_device_lines_give_index_capability_and_name(
    text: str, expected: list[tuple[int, str | None, str]]
) -> None:
    assert _gpus(read_paste(text)) == expected


def test_nbody_in_a_wsl_paste_is_read() -> None:
    facts = read_capture("nbody_steps_wsl_docker__dockerwin-7581_rtx2080ti.txt")
    assert _gpus(facts) == [(0, "GeForce RTX 2080 Ti", "7.5")]


def test_a_sample_run_twice_is_one_device() -> None:
    assert _gpus(read_paste(_NBODY_OLD + "\n" + _NBODY_OLD)) == [(0, "GeForce RTX 3090", "8.6")]


@pytest.mark.parametrize(
    "text",
    [
        # NVIDIA/cuda-samples Common/helper_cuda.h and nbody.cpp: the format strings, not output
        '    printf("GPU Device %d: \\"%s\\" with compute capability %d.%d\\n\\n",\n',
        '      printf("> Compute %d.%d CUDA device: [%s]\\n", props.major, props.minor,\n',
        # wang-bin/QtAV#1005 (isgursoy, 2017-11-27): another program's device line
        "MapSMtoCores for SM 6.1 is undefined.  Default to use 192 Cores/SM\n"
        "CUDA Device: GeForce GTX 1070, Compute: 6.1, CUDA Cores: 2048, Clock: 1645 MHz\n",
        'MyGPU Device 0: "Tesla T4" with compute capability 7.5\n',
        "> Compute 8.6 CUDA device: []\n",
    ],
)
def test_sample_near_misses_name_no_gpu(text: str) -> None:
    assert cuda_samples.parse_sample_devices(text).gpus == []
    assert not cuda_samples.detect_sample_devices(text)


# --- macOS --------------------------------------------------------------------------------------

# servo/pathfinder#3 (mmastrac, 2017-02-14): System Information copied with tabs, the Intel GPU
# first.
_PROFILER_TABS = (
    "```Intel Iris Pro:\n\n  Chipset Model:\tIntel Iris Pro\n  Type:\tGPU\n  Bus:\tBuilt-In\n"
    "  VRAM (Dynamic, Max):\t1536 MB\n  Vendor:\tIntel (0x8086)\n  Device ID:\t0x0d26\n"
    "  Revision ID:\t0x0008\n  Automatic Graphics Switching:\tSupported\n"
    "  gMux Version:\t4.0.8 [3.2.8]\n  Metal:\tSupported\n\nNVIDIA GeForce GT 750M:\n\n"
    "  Chipset Model:\tNVIDIA GeForce GT 750M\n  Type:\tGPU\n  Bus:\tPCIe\n"
    "  PCIe Lane Width:\tx8\n  VRAM (Total):\t2048 MB\n  Vendor:\tNVIDIA (0x10de)\n"
    "  Device ID:\t0x0fe9\n  Revision ID:\t0x00a2\n  ROM Revision:\t3776\n"
)
# acidanthera/bugtracker#1231 (arrmo, 2020-10-23): macOS's placeholder, then the same GPU named.
_PROFILER_PLACEHOLDER = (
    "Graphics/Displays:\n\n    NVIDIA Chip Model:\n\n      Chipset Model: NVIDIA Chip Model\n"
    "      Type: GPU\n      Bus: PCIe\n      PCIe Lane Width: x16\n"
    "      VRAM (Dynamic, Max): 256 MB\n      Vendor: NVIDIA (0x10de)\n      Device ID: 0x1401\n"
    "      Revision ID: 0x00a1\n      ROM Revision: preset 1.0.0\n      Metal: Supported\n"
)
_PROFILER_NAMED = (
    "Graphics/Displays:\n\n    MSI GeForce GTX 960:\n\n      Chipset Model: MSI GeForce GTX 960\n"
    "      Type: GPU\n      Bus: PCIe\n      PCIe Lane Width: x16\n"
    "      VRAM (Dynamic, Max): 2048 MB\n      Vendor: NVIDIA (0x10de)\n      Device ID: 0x1401\n"
)
# zeam-vm/cpu_info#17 (zacky1972, 2020-04-22): an AMD GPU, cut.
_PROFILER_AMD = (
    "$ system_profiler SPDisplaysDataType\nGraphics/Displays:\n\n    Radeon Pro Vega 64:\n\n"
    "      Chipset Model: Radeon Pro Vega 64\n      Type: GPU\n      Bus: PCIe\n"
    "      PCIe Lane Width: x16\n      VRAM (Total): 16 GB\n      Vendor: AMD (0x1002)\n"
    "      Device ID: 0x6860\n"
)


def test_system_profiler_reads_the_nvidia_block_only() -> None:
    facts = read_paste(_PROFILER_TABS)
    assert [
        (g.name, g.compute_capability, g.pci_device_id, g.memory_total_mib) for g in facts.gpus
    ] == [("NVIDIA GeForce GT 750M", "3.0", "10de:0fe9", 2048)]


def test_macos_placeholder_name_is_no_name() -> None:
    facts = macos.parse_macos(_PROFILER_PLACEHOLDER)
    assert [(g.name, g.pci_device_id) for g in facts.gpus] == [(None, "10de:1401")]
    named = read_paste(_PROFILER_NAMED)
    assert [(g.name, g.compute_capability) for g in named.gpus] == [("MSI GeForce GTX 960", "5.2")]


def test_an_amd_block_is_no_gpu() -> None:
    assert macos.parse_macos(_PROFILER_AMD).gpus == []


@pytest.mark.parametrize(
    ("text", "names"),
    [
        # atg/chocolat-public#1631 (ohshhh): a crash report's system profile, cut
        (
            "Model: MacBookPro6,2, BootROM MBP61.0057.B0F, 2 processors, Intel Core i5, 2.4 GHz,"
            " 8 GB, SMC 1.58f17\n"
            "Graphics: Intel HD Graphics, Intel HD Graphics, Built-In, 288 MB\n"
            "Graphics: NVIDIA GeForce GT 330M, NVIDIA GeForce GT 330M, PCIe, 256 MB\n"
            "Memory Module: BANK 0/DIMM0, 4 GB, DDR3, 1067 MHz, 0x029E,"
            " 0x434D5341344758334D314131303636433720\n",
            [("NVIDIA GeForce GT 330M", "1.2")],
        ),
        # atg/chocolat-public#130 (Me1000): two NVIDIA GPUs the catalogue does not know
        (
            "Graphics: NVIDIA GeForce 9600M GT, NVIDIA GeForce 9600M GT, PCIe, 256 MB\n"
            "Graphics: NVIDIA GeForce 9400M, NVIDIA GeForce 9400M, PCI, 256 MB\n"
            "Memory Module: global_name\n",
            [("NVIDIA GeForce 9600M GT", None), ("NVIDIA GeForce 9400M", None)],
        ),
    ],
)
def test_a_crash_reports_graphics_lines(text: str, names: list[tuple[str, str | None]]) -> None:
    assert [(g.name, g.compute_capability) for g in read_paste(text).gpus] == names


def test_an_about_this_mac_summary_line_is_read() -> None:
    facts = read_capture("prose_macos_config_webdriver__gpujpeg-4_gt750m-310.42.25f02.txt")
    assert _gpus(facts) == [(None, "NVIDIA GeForce GT 750M", "3.0")]
    assert facts.driver.version is None  # "NVIDIA GPU Driver v10.10.14  310.42.25f02": macOS's


@pytest.mark.parametrize(
    "text",
    [
        "Graphics: NVIDIA GeForce GTX 970 or AMD Radeon R9 290\n",
        "Minimum:\nOS: Windows 10\nGraphics: NVIDIA GeForce GTX 660 2048 MB\n",
        "Graphics: NVIDIA Chip Model, NVIDIA Chip Model, PCIe, 256 MB\n",
        "Graphics: Intel Iris Pro 1536MB (Built-In)\n",
        "Graphics:  Device-1: NVIDIA GP104 [GeForce GTX 1080] driver: nvidia v: 430.40\n",
        "The graphics: NVIDIA GeForce GT 750M 2048MB\n",
    ],
)
def test_graphics_line_near_misses_stay_unread(text: str) -> None:
    assert macos.parse_macos(text).gpus == []


# --- nvidia-smi --query-gpu=uuid ------------------------------------------------------------------


def test_a_uuid_column_gives_one_gpu_per_uuid() -> None:
    facts = read_capture("nvsmi_query_uuid_csv_devicequery_dir__dockerwin-13658_4x-uuid.txt")
    assert [(g.name, g.uuid) for g in facts.gpus] == [
        (None, "GPU-52dc20f4-4d06-1338-85c9-c493c5dcec02"),
        (None, "GPU-873ec493-2856-0e4e-b7c4-47f859451051"),
        (None, "GPU-48b827a9-e51b-75c5-1149-389a3d45d09c"),
        (None, "GPU-acb454dd-c800-18af-ce94-27e4f8ece22a"),
    ]


@pytest.mark.parametrize(
    "text",
    [
        # LMCache/LMCache#2565 (gemini-code-assist, review thread, 2026-02-07): the command in a
        # script, no output
        "+CURRENT_GPUS=$(nvidia-smi --query-gpu=uuid --format=csv,noheader)\n```\n"
        "The command `nvidia-smi --query-gpu=uuid --format=csv,noheader` produces"
        " newline-separated UUIDs when multiple GPUs are present.\n",
        "nvidia-smi --query-gpu=uuid --format=csv\nuuid\nNo devices were found\n"
        "GPU-52dc20f4-4d06-1338-85c9-c493c5dcec02\n",
        "nvidia-smi --query-gpu=uuid --format=csv\nuuid\nGPU-52dc20f4\n",
        "nvidia-smi --query-gpu=uuid --format=csv\nuuid\n"
        "GPU-52dc20f4-4d06-1338-85c9-c493c5dcec02 x\n",
    ],
)
def test_uuid_column_near_misses_name_no_gpu(text: str) -> None:
    assert nvidia_smi.parse_query_csv(text).gpus == []


def test_a_selected_gpus_uuid_has_no_index() -> None:
    text = "$ nvidia-smi -i 3 --query-gpu=uuid --format=csv,noheader\n"
    text += "GPU-52dc20f4-4d06-1338-85c9-c493c5dcec02\n"
    assert [(g.index, g.uuid) for g in nvidia_smi.parse_query_csv(text).gpus] == [
        (None, "GPU-52dc20f4-4d06-1338-85c9-c493c5dcec02")
    ]


# --- issue-form bullets ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "driver", "names"),
    [
        (
            "md_bold_env_bullets__nvpatch-1009_rtx3050-6gb-580.95.05.txt",
            "580.95.05",
            ["RTX 3050 6GB"],
        ),
        (
            "md_bold_env_bullets_x2__nvpatch-1034_2x-rtx3090-535.288.01.txt",
            "535.288.01",
            ["rtx3090", "rtx3090"],
        ),
        (
            "md_bold_env_bullets_popos__nvpatch-441_rtx3060ti-495.29.05.txt",
            "495.29.05",
            ["RTX 3060Ti"],
        ),
    ],
)
def test_form_bullets_are_read(name: str, driver: str, names: list[str]) -> None:
    facts = read_capture(name)
    assert facts.driver.version == driver
    assert [(g.name, g.compute_capability) for g in facts.gpus] == [(n, "8.6") for n in names]


@pytest.mark.parametrize(
    ("text", "driver", "names"),
    [
        # keylase/nvidia-patch#971 (talibfitrah, 2025-07-14): a bullet touching its key
        (
            "- Nvidia driver version: 570.169\n-GPU Model: GeForce RTX 3060\n-OS: Ubuntu 22.04\n"
            "- [x] I'm willing to participate in testing of new patch version\n",
            "570.169",
            ["GeForce RTX 3060"],
        ),
        # keylase/nvidia-patch#1118 (Qu4dr0, 2026-09-09): an aside in italics after the name, cut
        (
            "- Nvidia driver version: [616.92](https://international.download.nvidia.com/Windows/"
            "616.92/616.92-desktop-win10-win11-64bit-international-nsd-dch-whql.exe)\n"
            "- GPU Model: GTX 1660 Ti _(I'm not the only one who uses those patches, you know, so"
            " in the end - who cares what GPU I got?)_\n",
            "616.92",
            ["GTX 1660 Ti"],
        ),
    ],
)
def test_more_form_bullets(text: str, driver: str, names: list[str]) -> None:
    facts = env_list.parse_env_list(text)
    assert (facts.driver.version, [g.name for g in facts.gpus]) == (driver, names)


@pytest.mark.parametrize(
    "text",
    [
        # keylase/nvidia-patch#450 (ajnightmare, 2021-10-29): the form's examples left in place
        "- Nvidia driver version: [e.g. 410.106.00]\n- GPU Model: [e.g. RTX 3090]\n"
        "- OS: [e.g. Ubuntu 18.04.5]\n",
        # keylase/nvidia-patch#40 (simonerni, 2019-01-30): an answer still in the brackets
        "- Nvidia driver version: [e.g. 417.71]\n- GPU Model: [RTX 2060]\n- OS: [Ubuntu 18.04]\n",
        # keylase/nvidia-patch#952 (detiam, 2025-05-25): "GTX 3080" is no GPU
        "- Nvidia driver version: 570.153.02\n- GPU Model: GTX 3080\n- OS: Arch Linux rolling\n",
        # keylase/nvidia-patch#816 (Gelmo, 2024-07-03): a number without its series
        "- Nvidia driver version: 555.58.02\n- GPU Model: 3070 Ti\n- OS: Arch Linux\n",
    ],
)
def test_form_bullets_without_a_known_gpu_name_none(text: str) -> None:
    assert env_list.parse_env_list(text).gpus == []


@pytest.mark.parametrize(
    ("value", "name"),
    [
        ("RTX 3050 6GB", "RTX 3050 6GB"),
        ("NVIDIA GeForce GTX 1060 3GB", "NVIDIA GeForce GTX 1060 3GB"),
        ("NVIDIA T1000 8GB", "NVIDIA T1000 8GB"),
        ("RTX 3090 24GB", "RTX 3090"),
        ("RTX 3050 12GB", "RTX 3050"),
        ("rtx 5060 Ti 16gb", "rtx 5060 Ti"),
        ("NVIDIA GeForce GT 750M 2048MB", "NVIDIA GeForce GT 750M"),
    ],
)
def test_a_memory_size_stays_only_in_a_name_nvidia_gives(value: str, name: str) -> None:
    facts = env_list.parse_env_list(f"GPU: {value}\nDriver: 570.133.07\n")
    assert [g.name for g in facts.gpus] == [name]


@pytest.mark.parametrize(
    ("value", "count"),
    [("rtx3090 (x2)", 2), ("RTX 3090 (2x)", 2), ("RTX 3090 x 4", 4), ("RTX 3090 (x20)", 0)],
)
def test_a_count_after_the_name(value: str, count: int) -> None:
    assert len(env_list.parse_env_list(f"GPU: {value}\nDriver: 570.133.07\n").gpus) == count


# --- the catalogue --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "cc"),
    [
        ("GeForce 8800 GT", "1.1"),
        ("GeForce 9800 GT", "1.1"),
        ("G96C [GeForce 9500 GT]", "1.1"),
        ("NVIDIA GeForce GT 750M", "3.0"),
        ("GeForce GT 650M", "3.0"),
        ("NVIDIA GeForce GT 330M", "1.2"),
        ("NVIDIA GeForce RTX 2050", "8.6"),
        ("NVIDIA GeForce RTX 2060", "7.5"),
        ("rtx3090", "8.6"),
        ("RTX 3060Ti", "8.6"),
        ("GTX1080", "6.1"),
        ("Quadro RTX 5000", "7.5"),
        ("NVIDIA RTX 5000 Ada Generation", "8.9"),
        ("NVIDIA GeForce RTX 5050", "12.0"),
    ],
)
def test_catalogue_entries(name: str, cc: str) -> None:
    model = gpus.lookup(name)
    assert model is not None and model.compute_capability == cc


@pytest.mark.parametrize(
    "name",
    [
        "GeForce 8800 GTX",  # G80, 1.0
        "GeForce 8800 GTS 512",  # a G92 under a G80's name
        "GeForce GT 740M",  # GK107 or GK208
        "RTX 5000",  # Quadro RTX 5000 (7.5) or RTX 5000 Ada (8.9)
        "RTX 4000",
        "RTX 3000",
        "GTX 3080",
        "RTX30900",
    ],
)
def test_names_the_catalogue_cannot_place(name: str) -> None:
    assert gpus.lookup(name) is None


def test_the_8800_gts_capability_comes_from_the_catalogue() -> None:
    facts = read_capture("nvsmi_q_340_tesla_era__netdata-pr2759_8800gt-340.102.txt")
    assert _gpus(facts) == [(0, "GeForce 8800 GT", "1.1")]


# --- a driver in a sentence -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "driver"),
    [
        # NVIDIA-developer-blog/code-samples#20 (moravveji, 2019-04-12)
        (
            "I recently installed OpenMPI v. 4.0.0 together with CUDA/10.0.130. The nvidia driver"
            " is version 418.40.04. The example is compiled using these modules. \n",
            "418.40.04",
        ),
        # ggml-org/whisper.cpp#2857 (thehungngo, 2025-03-01): a step done
        (
            "1. Installed CUDA Toolkit 12.8 from `https://developer.nvidia.com/cuda-downloads` and"
            " NVIDIA driver version 571.96 (confirmed via `nvidia-smi`).\n",
            "571.96",
        ),
        # Oneflow-Inc/oneflow#9290 (zhaoyongke, 2022-10-23): a sentence's full stop after it
        (
            "Tested on Ubuntu 20.04, CUDA 11.8, RTX 4090 with Driver version 520.61.05.\n",
            "520.61.05",
        ),
        # nicehash/excavator#275 (Sixthdim, 2018-11-02)
        (
            "I am running nVidia driver version 416.34. I have an SLI bridge connected, but SLI is"
            " disabled.\n",
            "416.34",
        ),
    ],
)
def test_more_drivers_in_sentences_are_read(text: str, driver: str) -> None:
    assert driver_prose.parse_driver_prose(text).driver.version == driver


@pytest.mark.parametrize(
    "text",
    [
        "The latest driver is 575.64.\n",
        "I need to install driver 570.86.\n",
        "Installing NVIDIA driver 570.86 failed.\n",
        "The driver is version 570.86 or later.\n",
        "driver 570.86.x\n",
        "driver 570.124.06.1\n",
        "My driver is 550.54. It should be 570.86.\n",  # two versions
    ],
)
def test_more_drivers_in_sentences_stay_unread(text: str) -> None:
    assert driver_prose.parse_driver_prose(text).driver.version is None


# --- a GPU in a sentence --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "driver", "gpu", "count"),
    [
        (
            "prose_steps_driver__whispercpp-2857_rtx2050-571.96.txt",
            "571.96",
            ("NVIDIA GeForce RTX 2050", "8.6"),
            1,
        ),
        (
            "prose_driver_4xp100_mpi_error__nvblog-samples-20_418.40.04.txt",
            "418.40.04",
            ("P100", "6.0"),
            4,
        ),
        (
            "lmstudio_prose_driver__lmstudio-1186_rtx5060ti-581.57.txt",
            "581.57",
            ("rtx 5060 Ti", "12.0"),
            1,
        ),
    ],
)
def test_a_gpu_named_as_the_writers_own(
    name: str, driver: str, gpu: tuple[str, str], count: int
) -> None:
    facts = read_capture(name)
    assert facts.driver.version == driver
    assert [(g.name, g.compute_capability) for g in facts.gpus] == [gpu] * count


@pytest.mark.parametrize(
    ("text", "name"),
    [
        # Nightmare-n/DepthAnyVideo#16 (teidenzero, 2024-10-22)
        (
            "I'm trying to run the software on the wooly_mammoth demo but I'm getting a CUDA"
            " error: out of memory on my RTX 4090 using the command `python run_infer.py"
            " --data_path ./demos/wooly_mammoth.mp4 --output_dir ./outputs/ --max_resolution"
            " 960`\nany idea why this might be happening?\n",
            "RTX 4090",
        ),
        # zai-org/CogVideo#34 (YeautyYE, 2023-03-11)
        (
            "My GPU is RTX3080, but when I use the command `sudo sh"
            " ./scripts/inference_cogvideo_pipeline.sh`, the following error occurs\n",
            "RTX3080",
        ),
        # bitsandbytes-foundation/bitsandbytes#1510 (tripleS-Dev, 2025-02-11)
        (
            "The libbitsandbytes_cuda128.dll file does not exist on my RTX5090 Windows 11"
            " system.\n",
            "RTX5090",
        ),
    ],
)
def test_more_gpus_named_as_the_writers_own(text: str, name: str) -> None:
    assert [g.name for g in gpu_prose.parse_gpu_prose(text).gpus] == [name]


@pytest.mark.parametrize(
    "text",
    [
        # n00mkrad/flowframes#139 (ld3z, 2022-05-21): a GPU they had
        "Nevermind, it seems to work with 720p video but not 1080p. Which is funny since my old"
        " GTX 1060 could do 1080p easy...\n",
        # hacksider/Deep-Live-Cam#1489 (lenovomen, 2025-09-07): GPUs to buy
        "Can you help me figure out which RTX card I should buy so that Deep Live Cam will work"
        " properly? Is RTX 2060 the minimum requirement? Or should I go for 3060?\n",
        # llava-rlhf/LLaVA-RLHF#39 (Winsome-A, 2025-01-23)
        "Well, I am not available to A100, so can I use 4090 instead of A100 to accomplish the"
        " whole process?\n",
        # HawaiiBeach/TinyNvidiaUpdateChecker#78 (znbaboy, 2020-01-22): two machines
        "I just got a new laptop for school and it has a gtx 1650 in it. I use your tool on my"
        " main PC at home with a gtx 1080 and it works great!\n",
        # jayrodge/NVIDIA-RTX5090-AI-Dev-Setup#1 (truebest, 2025-03-31): two GPUs, swapped
        "However, when I switch back from the RTX 5090 to the RTX 4090, the system regains the"
        " ability to boot up. Windows 11 works great with the RTX 5090.\n",
        # psygreg/rocm-ubuntu#2 (GesusResurrected, 2025-07-17): an AMD GPU
        "just for more information on this, i ran it and it worked on my RX 9060 XT GPU under"
        " ubuntu 25.04, thanks a lot !\n",
        # geerlingguy/raspberry-pi-pcie-devices#504 (geerlingguy, 2023-01-11): a name in a link
        "I bought an Nvidia RTX 4090, specifically the [Gigabyte GeForce RTX 4090"
        " OC](https://amzn.to/3KaTN26), and I'd like to see what happens with it on a Pi:\n\n"
        "![gpu-nvidia-rtx-4090-oc](https://user-images.githubusercontent.com/481677/"
        "219104411-d43f5047-53d6-4efc-8a49-0f0827feeef2.jpg)\n",
        # ollama/ollama#1898 (Zenopheus, 2024-01-10): "RTX 5000" may be three boards
        "I was unable to get Ollama to recognize my RTX 5000 under WSL even though other"
        " programs have no problem.\n",
        "my next GPU will be an RTX 5090\n",
        "Does this work on my RTX 3060 or do I need an RTX 4090?\n",
        "my RTX 3060 and my RTX 4090\n",
        "my a2 account is locked\n",
        "The RTX 5090 is not supported yet.\n",
        "This model needs a node that has 8xH100.\n",
        "Our cluster has 8xA100 nodes, or so the docs say.\n",
    ],
)
def test_gpus_in_sentences_that_may_not_be_the_writers_stay_unread(text: str) -> None:
    assert gpu_prose.parse_gpu_prose(text).gpus == []
    assert not gpu_prose.detect_gpu_prose(text)


def test_a_tools_gpu_list_wins_over_a_sentence() -> None:
    table = capture_text("nvsmi_table_wsl2__wsl-11589_rtx3060-cuda-err.txt")
    facts = read_paste(table + "\nI get an error: out of memory on my RTX 4090 using the command\n")
    assert [g.name for g in facts.gpus] == ["NVIDIA GeForce RTX 3060"]
    assert "GPU in prose" not in (facts.probes[-1].detail or "")
