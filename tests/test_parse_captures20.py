"""A hardware answer that joins a machine's parts with " + " (llama.cpp's issue form: "Ryzen 5
2600 + MSI 1660 Ti Ventus 6GB OC", "Tesla P40 + 3090"), a GeForce number typed alone there; and
the near misses that must stay unread."""

from __future__ import annotations

import pytest

from checks.facts import capture, gpus
from checks.facts.model import HostFacts
from checks.facts.parsers import env_list


def _read(text: str) -> HostFacts:
    """A paste as `--from` reads it, the catalogue filled in."""
    return gpus.enrich(capture.parse(capture.Capture("paste", text)))


def _form(answer: str) -> str:
    return f"### Operating systems\n\nLinux\n\n### Hardware\n\n{answer}\n\n### Models\n\nQwen3\n"


@pytest.mark.parametrize(
    ("answer", "found"),
    [
        ("Tesla P40 + 3090", [("Tesla P40", "6.1"), ("3090", "8.6")]),  # llama.cpp#11401
        ("Ryzen 5 2600 + MSI 1660 Ti Ventus 6GB OC", [("MSI 1660 Ti Ventus", "7.5")]),  # #28018
        ("AMD EPYC 7773X + 2x RTX 3090 TI", [("RTX 3090 TI", "8.6")] * 2),  # #11200
        ("2x RTX 3090 + 5x RTX 4090", [("RTX 3090", "8.6")] * 2 + [("RTX 4090", "8.9")] * 5),
        ("i9-13900K + 2x 4090", [("4090", "8.9")] * 2),
        ("3090", [("3090", "8.6")]),
        ("NVIDIA GeForce RTX 5070", [("NVIDIA GeForce RTX 5070", "12.0")]),
    ],
)
def test_the_gpus_of_a_hardware_answer_are_read(answer: str, found: list[tuple[str, str]]) -> None:
    facts = _read(_form(answer))
    assert [(g.name, g.compute_capability) for g in facts.gpus] == found


@pytest.mark.parametrize(
    "answer",
    [
        "Ryzen 5 3600 + RX 6700 XT",  # AMD's, and a CPU number that is no GeForce's
        "i7-4790 + 16GB RAM",
        "RTX 3060+ recommended",  # a requirement
        "3090 or 4090",
        "AMD Radeon RX 7900 XTX",
        "Apple M2 Max",
        "computer",
        "Dgx Spark + 3090 or better",
    ],
)
def test_a_hardware_answer_naming_no_nvidia_gpu_reads_none(answer: str) -> None:
    assert env_list.parse_env_list(_form(answer)).gpus == []
