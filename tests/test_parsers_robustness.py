"""Every host parser and Format.detect returns on garbage, empty, huge and unrelated input."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from checks.facts import parsers
from checks.facts.model import HostFacts
from tests.conftest import FIXTURES

# nvidia_smi has its own garbage cases in test_nvidia_smi.py.
MODULES = [m for m in parsers.modules() if not m.__name__.endswith(".nvidia_smi")]


def _callables() -> list[tuple[str, Callable[[str], object]]]:
    found: list[tuple[str, Callable[[str], object]]] = []
    for module in MODULES:
        name = module.__name__.rsplit(".", 1)[-1]
        for attr in dir(module):
            if attr.startswith(("parse_", "detect_")):
                found.append((f"{name}.{attr}", getattr(module, attr)))
        for fmt in module.FORMATS:
            found.append((f"{name}.{fmt.name}.detect", fmt.detect))
        for probe in module.PROBES:
            found.append((f"{name}.{probe.name}.parse", probe.parse))
    return found


def _inputs() -> list[str]:
    rng = random.Random(20261122)
    texts = [
        "",
        "\n",
        "\x00" * 100,
        bytes(rng.randrange(256) for _ in range(20000)).decode("utf-8", errors="replace"),
        "x" * 200_000,
        " " * 100_000 + "x",
        "Device 0: " + "9" * 5000 + ", compute capability 8.6\n",
        "GPU 99999999999999999999: X\nGPU models and configuration: GPU 1: Y\n",
        "Device Index:   " + "1" * 6000 + "\nModel: x\n",
        "{" * 5000,
        "[" * 5000 + "]",
        '{"ServerVersion": [], "Runtimes": "x", "DiscoveredDevices": [1, null], "ClientInfo": 3}',
        "### gpuprov:nvcc PATH\n### gpuprov:dist \n### gpuprov:llamacpp /\n### gpuprov:cdi\n",
        "system_info: | CUDA : ARCHS = | = | : : |\n",
        "torch " + "1." * 50_000 + "\n",
        "Linux h 6.1 #" + " a" * 50_000 + "\n",
        "ldd (" + "GLIBC " * 20_000 + "\n",
        "NVRM version: NVIDIA UNIX " + "Kernel Module " * 10_000 + "\n",
    ]
    for path in sorted((FIXTURES / "real").iterdir()) + sorted(FIXTURES.glob("captures/*/*")):
        if path.is_file():
            texts.append(path.read_text(errors="replace"))
    return texts


@pytest.mark.parametrize(("name", "func"), _callables(), ids=[n for n, _ in _callables()])
def test_never_raises(name: str, func: Callable[[str], object]) -> None:
    for text in _inputs():
        result = func(text)
        if ".detect" in name or name.split(".")[-1].startswith("detect_"):
            assert isinstance(result, bool), name
        else:
            assert isinstance(result, HostFacts), name
