"""The shapes capture set 10 missed, read now, and the near misses beside them that must stay
unread: a driver given as a markdown link, a benchmark's "Device Name" (and its Chinese label),
a topology matrix cut above its header."""

from __future__ import annotations

import pytest

from checks.facts.parsers import env_list, gpu_topology, nvidia_smi

ZH_DEVICE_NAME = "\u8bbe\u5907\u540d\u79f0"  # "device name"
FW = "\uff1a"  # the full-width colon

NVPATCH = (
    "- Nvidia driver version: [576.15](https://international.download.nvidia.com/Windows/576.15hf/"
    "576.15-desktop-notebook-win10-win11-64bit-international-dch.hf.exe)\n"
    "- GPU Model: GTX 1660 Ti\n- OS: Windows 10\n"
)


def test_a_driver_given_as_a_markdown_link_reads_as_the_links_text() -> None:
    facts = env_list.parse_env_list(NVPATCH)
    assert facts.driver.version == "576.15"
    assert [g.name for g in facts.gpus] == ["GTX 1660 Ti"]


@pytest.mark.parametrize(
    "line",
    [
        "- Nvidia driver version: [e.g. 470.103.01]",  # the template's example, no link
        "- Nvidia driver version: [e.g. 410.48] 535.146.02",
        "- Nvidia driver version: [download](https://example.com/576.15.exe)",  # no version
        "- Nvidia driver version: see [576.15](https://example.com/576.15.exe)",  # not at the start
        "- Nvidia driver version: [576.15]( https://example.com/x.exe)",  # no link: space in URL
        "- Nvidia driver version: [576.15](https://example.com/x.exe",  # not closed
    ],
)
def test_other_brackets_in_a_driver_line_stay_unread(line: str) -> None:
    facts = env_list.parse_env_list(line + "\n- GPU Model: GTX 1660 Ti\n")
    assert facts.driver.version is None


@pytest.mark.parametrize(
    ("text", "name"),
    [
        (
            f"## 设备信息\n- {ZH_DEVICE_NAME}{FW}NVIDIA RTX PRO 6000 Blackwell Server Edition\n",
            "NVIDIA RTX PRO 6000 Blackwell Server Edition",
        ),
        (f"- {ZH_DEVICE_NAME}: NVIDIA GeForce RTX 5090 D\n", "NVIDIA GeForce RTX 5090 D"),
        ("Device Name : TITAN RTX\n", "TITAN RTX"),
        (
            "Device Name: NVIDIA RTX PRO 6000 Blackwell Workstation Edition\n",
            "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
        ),
        (
            f"- {ZH_DEVICE_NAME}{FW}NVIDIA GeForce RTX 4090 48G DDR5\n",
            "NVIDIA GeForce RTX 4090",
        ),  # cut at memory
    ],
)
def test_a_device_name_the_catalogue_knows_is_read(text: str, name: str) -> None:
    assert env_list.detect_env_list(text)
    assert [g.name for g in env_list.parse_env_list(text).gpus] == [name]


@pytest.mark.parametrize(
    "text",
    [
        "Device Name: AMD Radeon RX 7800 XT\n",  # not a GPU the catalogue knows
        "Device Name : Gigabyte Aero 15X V8\n",
        "Device Name: /dev/ttyUSB0\n",
        f"- {ZH_DEVICE_NAME}{FW}请填写\n",  # the template's "please fill in"
        f"- {ZH_DEVICE_NAME}{FW}RTX 4090 or better\n",  # a requirement
        "Device Name: NVIDIA GPU\n",
        f"{ZH_DEVICE_NAME}NVIDIA GeForce RTX 4090\n",  # no colon
        f"- 设备{FW}NVIDIA GeForce RTX 4090\n",  # another label
        f"- Python版本{FW}py31013\n",
    ],
)
def test_device_names_that_are_no_known_gpu_stay_unread(text: str) -> None:
    assert not env_list.parse_env_list(text).gpus


def test_a_device_name_does_not_make_a_benchmarks_cuda_the_drivers() -> None:
    facts = env_list.parse_env_list(
        "CUDA Version : 10.2\nCudnn Version : 7605\nDevice Name : TITAN RTX\n"
    )
    assert facts.driver.cuda_version is None


def _row(name: str, cells: list[str]) -> str:
    return "    ".join([name, *cells])


GPU5 = _row("GPU5", ["NV18"] * 5 + ["X", "NV18", "NV18", "SYS", "SYS"])
GPU6 = _row("GPU6", ["NV18"] * 6 + ["X", "NV18", "SYS", "SYS"])
GPU7 = _row("GPU7", ["NV18"] * 7 + ["X", "SYS", "SYS"])
NIC0 = _row("NIC0", ["PIX", "NODE"] + ["SYS"] * 6 + ["X", "NODE"])


def test_a_matrix_cut_above_its_header_shows_its_gpus_up_to_the_next_devices_row() -> None:
    facts = gpu_topology.parse_gpu_topology("\n".join(["```", GPU5, GPU6, GPU7, NIC0]))
    assert [g.index for g in facts.gpus] == list(range(8))
    assert all(g.name is None for g in facts.gpus)


@pytest.mark.parametrize(
    "lines",
    [
        [GPU5, GPU6, GPU7],  # cut before another device's row: the count is not shown
        [GPU5, GPU6, GPU7, ""],
        [GPU5, GPU6, GPU7, "", NIC0],  # the device row is not the next line
        [GPU5, GPU7, NIC0],  # rows out of order
        [GPU5, GPU6, GPU7.replace(" X ", " NV18 "), NIC0],  # a GPU row that does not mark itself
        [GPU5, GPU6, GPU7, NIC0.replace(" X ", " SYS ")],  # the device row marks no column
        [GPU5, GPU6, GPU7, _row("NIC0", ["PIX"] * 7 + ["X", "NODE"])],  # X in GPU7's column
        [GPU5, GPU6, GPU7, "Legend:", "", "  X    = Self"],
    ],
)
def test_headless_rows_that_do_not_show_the_count_stay_unread(lines: list[str]) -> None:
    text = "\n".join(lines)
    assert not gpu_topology.detect_gpu_topology(text)
    assert gpu_topology.parse_gpu_topology(text).gpus == []


LISTED = "GPU 0: NVIDIA GeForce RTX 4090 (UUID: GPU-c475e08b-0cc5-f5aa-4326-99699429b449)"


@pytest.mark.parametrize("end", ["", "```\n"])  # a closing fence ends the paste too
def test_a_list_ending_inside_a_gpus_name_shows_the_gpu_with_no_name(end: str) -> None:
    facts = nvidia_smi.parse_list(f"$ nvidia-smi -L\n{LISTED}\nGPU 1: NVIDIA GeForc\n{end}")
    assert [(g.index, g.name) for g in facts.gpus] == [(0, "NVIDIA GeForce RTX 4090"), (1, None)]


@pytest.mark.parametrize(
    "text",
    [
        f"{LISTED}\nGPU 1: NVIDIA GeForc\nsome more text\n",  # not where the paste ends
        f"{LISTED}\nGPU 2: NVIDIA GeForc\n",  # not the next index
        f"{LISTED}\n\nGPU 0: NVIDIA GeForc\n",
        f"{LISTED}\nok\nGPU 1: NVIDIA GeForc\n",  # not right under the GPU before it
        f"{LISTED}\nGPU 1:\n",  # no name at all
        f"{LISTED}\n  MIG 1g.10gb     Device  0: (UUID: MIG-ce861fb0\n",
        "Found GPU 0: RTX 4090 (UUID: GPU-c475e08b)\nGPU 1: NVIDIA\n",  # not a list line
    ],
)
def test_other_lines_after_a_list_add_no_gpu(text: str) -> None:
    assert len(nvidia_smi.parse_list(text).gpus) == 1
