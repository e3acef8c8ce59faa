"""The shapes capture set 8 missed, read now, and the near misses beside them that must stay
unread: a headless collect_env chunk, fastfetch's GPU lines, llama.cpp's template Hardware
answer and device lines without their header, docker info's CDI devices, and a driver typed in
parentheses after the CUDA version."""

from __future__ import annotations

import pytest

from checks.facts import capture
from checks.facts.parsers import collect_env, containers, env_list, llamacpp, neofetch

CHUNK = (
    "CUDA_MODULE_LOADING set to   : \n"
    "GPU models and configuration : \n"
    "GPU 0: NVIDIA GeForce RTX 4090\n"
    "GPU 1: NVIDIA GeForce RTX 4090\n"
    "\n"
    "Nvidia driver version        : 570.86.15\n"
    "cuDNN version                : Could not collect\n"
)


def test_a_collect_env_chunk_without_its_head_is_read() -> None:
    assert collect_env.detect_collect_env(CHUNK)
    facts = collect_env.parse_collect_env(CHUNK)
    assert facts.driver.version == "570.86.15"
    assert [(g.index, g.name) for g in facts.gpus] == [
        (0, "NVIDIA GeForce RTX 4090"),
        (1, "NVIDIA GeForce RTX 4090"),
    ]


@pytest.mark.parametrize(
    "text",
    [
        # the GPU and driver keys alone, no key only collect_env prints
        "GPU models and configuration: GPU 0: NVIDIA GeForce RTX 4090\n"
        "Nvidia driver version: 570.86.15\n",
        # collect_env's own keys without the driver key
        "CUDA_MODULE_LOADING set to: LAZY\nGPU models and configuration: GPU 0: NVIDIA A10\n",
        # a bullet list that quotes the keys is the template's, not the report's
        " - GPU models and configuration: GeForce RTX 2070\n - Nvidia driver version: 450.102.04\n"
        " - cuDNN version: 8.0\n",
    ],
)
def test_collect_env_keys_without_the_chunk_shape_stay_unrecognised(text: str) -> None:
    assert not collect_env.detect_collect_env(text)


def test_the_driver_in_parentheses_after_the_cuda_version_is_read() -> None:
    text = "- **GPU**: NVIDIA GeForce RTX 5090\n- **CUDA Version**: 12.8 (Driver 570.181)\n"
    facts = env_list.parse_env_list(text)
    assert (facts.driver.version, facts.driver.cuda_version) == ("570.181", "12.8")


@pytest.mark.parametrize(
    "line",
    [
        "- **CUDA Version**: 12.8 (Driver 570.181",  # not closed
        "- **CUDA Version**: 12.8 (driver 570 or newer recommended)",
        "- **CUDA Version**: 12.8 (nvcc; driver 570.181)",  # not right after the version
        "- **CUDA Toolkit**: 12.8 (Driver 570.181)",  # not nvidia-smi's key
        "- **CUDA Version**: 12.8 (Driver >= 570.26)",
    ],
)
def test_no_driver_from_other_parentheses(line: str) -> None:
    facts = env_list.parse_env_list("- **GPU**: NVIDIA GeForce RTX 5090\n" + line + "\n")
    assert facts.driver.version is None


def _docker_info(*devices: str) -> str:
    items = "".join(f"  cdi: {d}\n" for d in devices)
    return f"Server:\n Server Version: 29.1.0\n Discovered Devices:\n{items} Swarm: inactive\n"


def test_cdi_devices_by_index_are_gpus() -> None:
    text = _docker_info("nvidia.com/gpu=0", "nvidia.com/gpu=GPU-0008bcf4", "nvidia.com/gpu=all")
    facts = containers.parse_docker_info_text(text)
    assert [(g.index, g.name) for g in facts.gpus] == [(0, None)]


@pytest.mark.parametrize(
    "devices",
    [
        ("nvidia.com/gpu=all",),
        ("nvidia.com/gpu=0:1", "nvidia.com/gpu=0:2"),  # MIG devices, not GPUs
        ("nvidia.com/gpu=GPU-0008bcf4-cae8-0120-a18f-bc344fb1c710",),  # a name, not a count
        ("D.08c90ebc35cf/gpu=0", "D.08c90ebc35cf/gpu=1"),  # another vendor's names (moby#51851)
        ("nvidia.com/gpu=gpu0",),
    ],
)
def test_other_cdi_names_add_no_gpu(devices: tuple[str, ...]) -> None:
    assert containers.parse_docker_info_text(_docker_info(*devices)).gpus == []


def test_a_device_line_without_its_header_implies_the_lower_indices() -> None:
    text = (
        "Sep 26 10:43:08 ollama[6664]:   Device 2: Tesla V100-SXM2-32GB, compute capability 7.0,"
        " VMM: yes, ID: GPU-dfc3d6a8\n"
    )
    facts, seen = capture.recognise(capture.clean(text))
    assert "llama.cpp" in " ".join(seen)
    assert [(g.index, g.name, g.compute_capability) for g in facts.gpus] == [
        (0, None, None),
        (1, None, None),
        (2, "Tesla V100-SXM2-32GB", "7.0"),
    ]


@pytest.mark.parametrize(
    "text",
    [
        "  Device 0: Tesla P40, compute capability 6.1\n",  # 2023's shape needs its header
        "My Device 1: NVIDIA GeForce RTX 3090, compute capability 8.6, VMM: yes\n",  # prose
        "Device 0: NVIDIA GeForce RTX 3090 is slow\n",
    ],
)
def test_device_lines_without_the_full_shape_stay_unrecognised(text: str) -> None:
    assert not llamacpp.detect_llamacpp(text)


def test_a_high_device_index_fills_no_gaps() -> None:
    text = "  Device 40: NVIDIA H100, compute capability 9.0, VMM: yes\n"
    assert [g.index for g in llamacpp.parse_llamacpp(text).gpus] == [40]


TEMPLATE = "### Name and Version\n\nversion: 9333 (35c9b1f39)\n\n### Hardware\n\n{}\n\n### Models\n"


def test_the_template_hardware_answer_names_the_gpu() -> None:
    text = TEMPLATE.format("NVIDIA GeForce RTX 5060 Laptop GPU\nIntel Core i7-14650HX")
    assert [g.name for g in llamacpp.parse_llamacpp(text).gpus] == [
        "NVIDIA GeForce RTX 5060 Laptop GPU"
    ]


@pytest.mark.parametrize(
    "text",
    [
        TEMPLATE.format("Ryzen 5 2600 + MSI 1660 Ti Ventus 6GB OC"),
        TEMPLATE.format("Tesla P40 + 3090"),
        TEMPLATE.format("NVIDIA GeForce RTX 9999"),  # not in the catalogue
        TEMPLATE.format("A laptop.\n\nNVIDIA GeForce RTX 4090"),  # not right below the heading
        "### Hardware\n\nNVIDIA GeForce RTX 4090\n",  # no other heading of the template
        TEMPLATE.format("") + "\nNVIDIA GeForce RTX 4090\n",
    ],
)
def test_hardware_answers_that_are_not_a_bare_name_stay_unread(text: str) -> None:
    assert llamacpp.parse_llamacpp(text).gpus == []


def test_fastfetch_gpu_lines_beside_its_logo() -> None:
    text = (
        " ,loooooooc.       .loooo.    GPU 1: NVIDIA GeForce RTX 4090 (16384) @ 2.52 GHz"
        " (1.2 GiB / 23.99 GiB, 5%) [Discrete]\n"
        "   .,;;;'.         ;ooooc     GPU 2: Intel Graphics @ 2.00 GHz [Integrated]\n"
        "       ...        ,ooool.     Memory: 15.92 GiB / 62.28 GiB (26%)\n"
    )
    assert neofetch.detect_fastfetch(text)
    assert not neofetch.detect_neofetch(text)
    assert [g.name for g in neofetch.parse_fastfetch(text).gpus] == ["NVIDIA GeForce RTX 4090"]


@pytest.mark.parametrize(
    "text",
    [
        "GPU 0: NVIDIA GeForce RTX 4090\n",  # collect_env's line, no type tag
        "GPU 1: AMD Radeon RX 7600 XT [Discrete]\n",
        "GPU: NVIDIA GeForce RTX 4090 [Discrete] is what I have\n",
    ],
)
def test_lines_without_fastfetchs_shape_name_no_gpu(text: str) -> None:
    assert neofetch.parse_fastfetch(text).gpus == []
