"""Shapes capture set 7 showed (tests/fixtures/corpus/captures/, MANIFEST rows from set 7): each
read as the line says, and the near misses beside them read as nothing."""

from __future__ import annotations

import pytest

from checks.facts.parsers import collect_env, containers, llamacpp, ollama, sglang


def _gpus(facts: object) -> list[tuple[int | None, str | None]]:
    return [(g.index, g.name) for g in facts.gpus]  # type: ignore[attr-defined]


def test_llama_cpp_device_info_block() -> None:
    """common_params_print_info's block (llama.cpp#25488), after its "0.00.111.024 I " prefix
    is taken off by capture.clean."""
    text = "device_info:\n  - CUDA0   : NVIDIA GeForce RTX 3090 (24575 MiB, 23332 MiB free)\n"
    assert llamacpp.detect_llamacpp(text)
    (gpu,) = llamacpp.parse_llamacpp(text).gpus
    assert (gpu.index, gpu.name, gpu.memory_total_mib) == (0, "NVIDIA GeForce RTX 3090", 24575)


@pytest.mark.parametrize(
    "text",
    [
        "  - Vulkan0 : NVIDIA GeForce RTX 3090 (24575 MiB, 23332 MiB free)\n",
        "  - CUDA0   : NVIDIA GeForce RTX 3090 (24575 MiB)\n",
        "CUDA0 - NVIDIA GeForce RTX 3090 (24575 MiB, 23332 MiB free)\n",
    ],
)
def test_device_lines_of_other_shapes_are_not_cuda_devices(text: str) -> None:
    assert not llamacpp.detect_llamacpp(text)
    assert llamacpp.parse_llamacpp(text).gpus == []


def test_a_terminal_wrapped_device_line() -> None:
    """llama.cpp#14424: the device line joined to "found 1 CUDA devices:" by a wrapped paste."""
    text = (
        "ggml_cuda_init: found 1 CUDA devices:" + " " * 100 + "Device 0: NVIDIA GeForce RTX 4090,"
        " compute capability 8.9, VMM: yes" + " " * 60 + "\n"
    )
    (gpu,) = llamacpp.parse_llamacpp(text).gpus
    assert (gpu.name, gpu.compute_capability) == ("NVIDIA GeForce RTX 4090", "8.9")
    assert llamacpp.parse_llamacpp("see Device 0: X, compute capability 8.9\n").gpus == []


def test_vulkan_devices_of_nvidias_driver_only_and_only_without_cuda() -> None:
    """llama.cpp#14826's Vulkan build: two NVIDIA GPUs; an AMD one is not read, and a log that
    also lists CUDA devices keeps CUDA's numbering."""
    vulkan = (
        "ggml_vulkan: Found 3 Vulkan devices:\n"
        "ggml_vulkan: 0 = NVIDIA GeForce RTX 3060 (NVIDIA) | uma: 0 | fp16: 1 | bf16: 0\n"
        "ggml_vulkan: 1 = NVIDIA GeForce GTX 1660 SUPER (NVIDIA) | uma: 0 | fp16: 1 | bf16: 0\n"
        "ggml_vulkan: 2 = AMD Radeon RX 6800 (AMD proprietary driver) | uma: 0 | fp16: 1\n"
    )
    assert llamacpp.detect_llamacpp(vulkan)
    assert _gpus(llamacpp.parse_llamacpp(vulkan)) == [
        (0, "NVIDIA GeForce RTX 3060"),
        (1, "NVIDIA GeForce GTX 1660 SUPER"),
    ]
    cuda = "  Device 0: NVIDIA GeForce GTX 1660 SUPER, compute capability 7.5, VMM: yes\n"
    assert _gpus(llamacpp.parse_llamacpp(cuda + vulkan)) == [(0, "NVIDIA GeForce GTX 1660 SUPER")]


def test_sglang_check_env_cut_after_the_names() -> None:
    """sglang#19687: the paste ends after the grouped names line."""
    text = (
        "CUDA available: True" + " " * 40 + "\n"
        "GPU 0,1,2,3,4,5,6,7: NVIDIA H100 80GB HBM3" + " " * 40 + "\nGPU 0,1,2"
    )
    assert sglang.detect_check_env(text)
    assert _gpus(sglang.parse_check_env(text)) == [(i, "NVIDIA H100 80GB HBM3") for i in range(8)]


def test_nvidia_smi_list_beside_a_cuda_available_line_is_not_check_env() -> None:
    text = "CUDA available: True\nGPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-bf224eec-5f24)\n"
    assert not sglang.detect_check_env(text)


@pytest.mark.parametrize(
    ("text", "driver"),
    [
        ("INFO[0000] Using driver version 545.29.06               \n", "545.29.06"),
        (
            'time="2024-03-01T10:00:00Z" level=info msg="Using driver version 550.54.15"\n',
            "550.54.15",
        ),
    ],
)
def test_nvidia_ctk_cdi_generate_names_the_driver(text: str, driver: str) -> None:
    """nvidia-container-toolkit#396 (logrus on a terminal) and the same line elsewhere."""
    assert containers.detect_cdi_generate(text)
    assert containers.parse_cdi_generate(text).driver.version == driver


@pytest.mark.parametrize(
    "text",
    [
        "WARN[0000] Using driver version 545.29.06\n",
        "I am using driver version 545.29.06\n",
        "INFO[0000] Using driver version 12.4\n",
    ],
)
def test_other_driver_version_sentences_are_not_cdi_generate(text: str) -> None:
    assert not containers.detect_cdi_generate(text)


def test_early_ollama_nvml_discovery() -> None:
    """ollama#2573: gpu_info_nvml.c's debug lines, the device printed twice for one GPU."""
    text = (
        "dlsym: nvmlSystemGetDriverVersion\nCUDA driver version: 546.01\n"
        "[0] CUDA device name: NVIDIA GeForce RTX 3060\n[0] CUDA part number: \n"
        "[0] CUDA device name: NVIDIA GeForce RTX 3060\n"
    )
    assert ollama.detect_ollama(text)
    facts = ollama.parse_ollama(text)
    assert (facts.driver.version, facts.driver.cuda_version) == ("546.01", None)
    assert _gpus(facts) == [(0, "NVIDIA GeForce RTX 3060")]


def test_ollama_nvcuda_driver_line_is_the_cuda_version() -> None:
    """gpu_info_nvcuda.c's "CUDA driver version: 12.3" is the CUDA the driver supports, never
    the driver (and a 3-digit version is never read as CUDA)."""
    cuda = ollama.parse_ollama("CUDA driver version: 12.3\n")
    assert (cuda.driver.version, cuda.driver.cuda_version) == (None, "12.3")
    nvml = ollama.parse_ollama("CUDA driver version: 546.01\n")
    assert nvml.driver.cuda_version is None
    assert not ollama.detect_ollama("CUDA driver version: 546.01\n")  # no device line beside


def test_pytorch_warning_kept_to_its_last_sentence() -> None:
    """vllm#16267: only "If you want to use the NAME GPU with PyTorch, ..." was pasted."""
    text = (
        "If you want to use the NVIDIA GeForce RTX 5070 Ti GPU with PyTorch, please check the"
        " instructions at https://pytorch.org/get-started/locally/\n"
    )
    assert collect_env.detect_collect_env(text)
    assert _gpus(collect_env.parse_collect_env(text)) == [(None, "NVIDIA GeForce RTX 5070 Ti")]
    assert not collect_env.detect_collect_env("If you want to use the GPU with PyTorch, fine.\n")
