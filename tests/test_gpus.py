"""The GPU catalogue: well-formed entries, lookups for real names, and enrich."""

from __future__ import annotations

import re

import pytest

from checks.facts import gpus
from checks.facts.model import Gpu, HostFacts


def test_entries_are_well_formed() -> None:
    entries = gpus.catalogue()
    assert len(entries) >= 60
    assert len({e.name for e in entries}) == len(entries)
    for entry in entries:
        assert entry.patterns, entry.name
        for pattern in entry.patterns:
            re.compile(pattern)
        assert re.fullmatch(r"\d{1,2}\.\d", entry.compute_capability), entry.name
        assert entry.architecture in gpus.ARCHITECTURES, entry.name
        assert entry.brand_class in gpus.BRAND_CLASSES, entry.name
        assert entry.memory_gib is None or 1 <= entry.memory_gib <= 512, entry.name


def test_citations() -> None:
    cited = gpus.citations()
    assert any("developer.nvidia.com/cuda-gpus" in c for c in cited)


@pytest.mark.parametrize(
    ("name", "cc", "arch", "klass"),
    [
        ("NVIDIA GeForce RTX 5090 D", "12.0", "Blackwell", "consumer"),
        ("NVIDIA GeForce RTX 5090", "12.0", "Blackwell", "consumer"),
        ("NVIDIA GeForce RTX 5070 Ti Laptop GPU", "12.0", "Blackwell", "consumer"),
        ("Tesla V100S-PCIE-32GB", "7.0", "Volta", "datacenter"),
        ("Tesla V100-SXM2-16GB", "7.0", "Volta", "datacenter"),
        ("NVIDIA RTX 5880 Ada Generation", "8.9", "Ada", "workstation"),
        ("NVIDIA RTX 6000 Ada Generation", "8.9", "Ada", "workstation"),
        ("NVIDIA RTX A6000", "8.6", "Ampere", "workstation"),
        ("Quadro RTX 6000", "7.5", "Turing", "workstation"),
        ("NVIDIA H200", "9.0", "Hopper", "datacenter"),
        ("NVIDIA H20", "9.0", "Hopper", "datacenter"),
        ("NVIDIA GH200 480GB", "9.0", "Hopper", "datacenter"),
        ("NVIDIA A100-SXM4-80GB", "8.0", "Ampere", "datacenter"),
        ("NVIDIA A100-SXM4-40GB", "8.0", "Ampere", "datacenter"),
        ("NVIDIA A10G", "8.6", "Ampere", "datacenter"),
        ("NVIDIA A2", "8.6", "Ampere", "datacenter"),
        ("NVIDIA RTX A2000 12GB", "8.6", "Ampere", "workstation"),
        ("NVIDIA L40S", "8.9", "Ada", "datacenter"),
        ("NVIDIA L4", "8.9", "Ada", "datacenter"),
        ("NVIDIA TITAN V", "7.0", "Volta", "consumer"),
        ("NVIDIA TITAN RTX", "7.5", "Turing", "consumer"),
        ("TITAN Xp", "6.1", "Pascal", "consumer"),
        ("NVIDIA GB10", "12.1", "Blackwell", "embedded"),
        ("NVIDIA B200", "10.0", "Blackwell", "datacenter"),
        ("NVIDIA B300 SXM6 AC", "10.3", "Blackwell", "datacenter"),
        ("NVIDIA GB200", "10.0", "Blackwell", "datacenter"),
        ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "12.0", "Blackwell", "workstation"),
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "12.0", "Blackwell", "datacenter"),
        ("Orin (nvgpu)", "8.7", "Ampere", "embedded"),
        ("NVIDIA Jetson AGX Thor", "11.0", "Blackwell", "embedded"),
        ("NVIDIA GeForce RTX 4070 SUPER", "8.9", "Ada", "consumer"),
        ("NVIDIA GeForce RTX 4070 Laptop GPU", "8.9", "Ada", "consumer"),
        ("NVIDIA GeForce RTX 3090 Ti", "8.6", "Ampere", "consumer"),
        ("NVIDIA GeForce RTX 3060", "8.6", "Ampere", "consumer"),
        ("NVIDIA GeForce RTX 2060 SUPER", "7.5", "Turing", "consumer"),
        ("NVIDIA GeForce GTX 1660 Ti", "7.5", "Turing", "consumer"),
        ("NVIDIA GeForce GTX 1080 Ti", "6.1", "Pascal", "consumer"),
        ("Tesla T4", "7.5", "Turing", "datacenter"),
        ("Tesla P40", "6.1", "Pascal", "datacenter"),
        ("Tesla P4", "6.1", "Pascal", "datacenter"),
        ("Tesla P100-PCIE-16GB", "6.0", "Pascal", "datacenter"),
    ],
)
def test_lookup(name: str, cc: str, arch: str, klass: str) -> None:
    model = gpus.lookup(name)
    assert model is not None, name
    assert (model.compute_capability, model.architecture, model.brand_class) == (cc, arch, klass)


def test_specific_names_win() -> None:
    assert (model := gpus.lookup("NVIDIA GeForce RTX 5090 D")) and model.name.endswith("5090 D")
    assert (model := gpus.lookup("NVIDIA A100-SXM4-80GB")) and model.memory_gib == 80
    assert (model := gpus.lookup("NVIDIA A100-PCIE-40GB")) and model.memory_gib is None


@pytest.mark.parametrize(
    "name", [None, "", "   ", "AMD Radeon RX 7900 XTX", "NVIDIA Graphics Device"]
)
def test_lookup_unknown(name: str | None) -> None:
    assert gpus.lookup(name) is None


def test_brand_class() -> None:
    assert gpus.brand_class("GeForce", "NVIDIA GeForce RTX 9999") == "consumer"
    assert gpus.brand_class("Tesla", "Tesla Z1") == "datacenter"
    assert gpus.brand_class("NVIDIA RTX", "NVIDIA RTX Z9") == "workstation"
    assert gpus.brand_class("NVIDIA", "NVIDIA H200") == "datacenter"
    assert gpus.brand_class("NVIDIA", "NVIDIA Z42") is None
    assert gpus.brand_class(None, "NVIDIA Jetson Nano") == "embedded"
    assert gpus.brand_class(None, None) is None


def test_normalise_architecture() -> None:
    assert gpus.normalise_architecture("Ada Lovelace") == "Ada"
    assert gpus.normalise_architecture("Hopper") == "Hopper"
    assert gpus.normalise_architecture("N/A") is None
    assert gpus.normalise_architecture(None) is None


def test_enrich_fills_unknowns_and_keeps_knowns() -> None:
    facts = HostFacts(
        gpus=[
            Gpu(index=0, name="NVIDIA GeForce RTX 5090 D"),
            Gpu(index=1, name="NVIDIA H200", compute_capability="9.0", architecture="Hopper"),
            Gpu(index=2, name="Tesla V100S-PCIE-32GB", brand_class="workstation"),
            Gpu(index=3, name="Mystery GPU"),
        ]
    )
    out = gpus.enrich(facts)
    assert out is not facts and facts.gpus[0].compute_capability is None
    first, second, third, fourth = out.gpus
    assert (first.compute_capability, first.architecture, first.brand_class) == (
        "12.0",
        "Blackwell",
        "consumer",
    )
    assert second.brand_class == "datacenter"
    assert third.brand_class == "workstation" and third.compute_capability == "7.0"
    assert (fourth.compute_capability, fourth.architecture, fourth.brand_class) == (
        None,
        None,
        None,
    )
