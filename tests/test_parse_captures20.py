"""A hardware answer that joins a machine's parts with " + " (llama.cpp's issue form: "Ryzen 5
2600 + MSI 1660 Ti Ventus 6GB OC", "Tesla P40 + 3090"), a GeForce number typed alone there; and
the near misses that must stay unread."""

from __future__ import annotations

import pytest

from checks.facts import gpus
from checks.facts.parsers import env_list
from tests.support.captures import read_paste


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
    facts = read_paste(_form(answer))
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


# --- the catalogue: boards nvidia-smi and collect_env name, by NVIDIA's CUDA GPU lists and pci.ids


@pytest.mark.parametrize(
    ("name", "cc"),
    [
        ("GRID K520", "3.0"),  # tensorflow/tensorflow#112's AWS g2 instance
        ("Tesla K40m", "3.5"),
        ("Tesla K20Xm", "3.5"),
        ("Tesla C2075", "2.0"),
        ("Tesla M2070", "2.0"),  # NVIDIA/gdrcopy#92
        ("Tesla P6", "6.1"),
        ("NVIDIA A100X", "8.0"),
        ("Quadro M4000", "5.2"),
        ("Quadro M4000M", "5.0"),  # the mobile part keeps its own entry
        ("Quadro K2200", "5.0"),
        ("Quadro K6000", "3.5"),
        ("Quadro K4000", "3.0"),
        ("Quadro T2000", "7.5"),
        ("NVIDIA T550 Laptop GPU", "7.5"),
        ("GeForce MX150", "6.1"),
        ("NVIDIA GeForce MX450", "7.5"),
        ("GeForce MX130", "5.0"),
        ("NVIDIA P104-100", "6.1"),
        ("NVIDIA CMP 30HX", "7.5"),
        ("NVIDIA CMP 90HX", "8.6"),
        ("NVIDIA CMP 170HX", "8.0"),
    ],
)
def test_older_and_rarer_boards_have_their_capability(name: str, cc: str) -> None:
    model = gpus.lookup(name)
    assert model is not None and model.compute_capability == cc


@pytest.mark.parametrize(
    "name", ["Apple M2", "MX Linux", "Radeon RX 5700", "Tesla Model 3", "GeForce GT 730"]
)
def test_names_no_entry_fixes_stay_unknown(name: str) -> None:
    assert gpus.lookup(name) is None
