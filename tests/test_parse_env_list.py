"""Hand-written environment lists: the keys and value shapes that count, and the look-alikes that
do not (the real lists are recorded cases under tests/fixtures/probes/env_list/)."""

from __future__ import annotations

import pytest

from checks.facts.parsers.env_list import detect_env_list, parse_env_list


def test_a_list_states_the_gpus_driver_and_cuda() -> None:
    text = (
        "Environment\n"
        "- **GPU**: 2x NVIDIA GeForce RTX 3090 (24 GB each)\n"
        "- **Driver Version**: 575.57.08\n"
        "- **CUDA Version**: 12.9\n"
    )
    facts = parse_env_list(text)
    assert detect_env_list(text)
    assert [g.name for g in facts.gpus] == ["NVIDIA GeForce RTX 3090"] * 2
    assert (facts.driver.version, facts.driver.cuda_version) == ("575.57.08", "12.9")


def test_a_name_ends_before_its_memory_or_its_count() -> None:
    facts = parse_env_list("GPU: NVIDIA GeForce RTX 4090 24GB\nDriver: 570.133.07\n")
    assert [g.name for g in facts.gpus] == ["NVIDIA GeForce RTX 4090"]
    facts = parse_env_list("GPUs: NVIDIA RTX A6000 x4\nDriver: 570.133.07\n")
    assert [g.name for g in facts.gpus] == ["NVIDIA RTX A6000"] * 4


@pytest.mark.parametrize(
    "text",
    [
        # one fact alone, other than a GPU the catalogue knows
        "Driver: 580.95.05\n",
        # not NVIDIA
        "GPU: AMD Radeon RX 7900 XTX\nDriver: 580.95.05\n",
        # nvidia-smi -q's padded keys belong to its own parser
        "    Product Name                          : NVIDIA H200\n"
        "    Driver Version                        : 570.124.06\n",
        # an ollama log line and a vLLM config are not lists
        'msg="inference compute" name="NVIDIA GeForce RTX 4090" driver=12.8\n',
        "device: cuda\ndriver: 580.95.05\n",
    ],
)
def test_look_alikes_are_not_lists(text: str) -> None:
    assert not detect_env_list(text)


@pytest.mark.parametrize(
    "text",
    [
        "GPU: NVIDIA GeForce RTX 5090\n",
        # a bare "CUDA" may be the toolkit's; a Windows driver's own numbering is not NVIDIA's
        "GPU: NVIDIA GeForce RTX 5090\nCUDA: 12.8\n",
        "GPU: NVIDIA GeForce RTX 5090\nDriver Version: 32.0.15.7283\n",
        # not a version
        "GPU: NVIDIA GeForce RTX 5090\nDriver: nvidia (open)\n",
    ],
)
def test_a_lone_known_gpu_line_gives_the_gpu_and_nothing_else(text: str) -> None:
    facts = parse_env_list(text)
    assert detect_env_list(text)
    assert [g.name for g in facts.gpus] == ["NVIDIA GeForce RTX 5090"]
    assert facts.driver.version is None and facts.driver.cuda_version is None
