"""On a GPU host: every capture reader agrees with NVML about the live GPUs.

The readers are tested on recorded outputs everywhere; here the same host answers twice, once
through NVML and once through the text a user would paste (nvidia-smi's table, `-q`, the CSV
query), and the two must agree. Skipped where no NVIDIA driver is present (CI has none).
"""

from __future__ import annotations

import ctypes.util
import json
import shutil
import subprocess
import sys

import pytest

from checks.facts import nvml
from checks.facts.capture import Capture, parse
from checks.facts.model import HostFacts

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        ctypes.util.find_library("nvidia-ml") is None or shutil.which("nvidia-smi") is None,
        reason="needs an NVIDIA GPU and its driver",
    ),
]

QUERY = "index,name,uuid,pci.bus_id,driver_version,memory.total,compute_cap"
OUTPUTS = {
    "table": ["nvidia-smi"],
    "query": ["nvidia-smi", "-q"],
    "csv": ["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv"],
}


def _run(argv: list[str]) -> str:
    return subprocess.run(argv, capture_output=True, text=True, check=True, timeout=60).stdout


@pytest.fixture(scope="module")
def live() -> HostFacts:
    return nvml.read()


@pytest.mark.parametrize("output", sorted(OUTPUTS))
def test_pasted_output_agrees_with_nvml(output: str, live: HostFacts) -> None:
    facts = parse(Capture(output, _run(OUTPUTS[output])))
    assert facts.driver.version == live.driver.version
    if output != "csv":  # the CSV query carries no CUDA version
        assert facts.driver.cuda_version == live.driver.cuda_version
    assert [g.name for g in facts.gpus] == [g.name for g in live.gpus]
    for pasted, real in zip(facts.gpus, live.gpus, strict=True):
        assert pasted.pci_bus_id and real.pci_bus_id
        assert pasted.pci_bus_id.lower().endswith(real.pci_bus_id.lower()[-12:])
        assert pasted.memory_total_mib == real.memory_total_mib
        if output != "table":
            assert pasted.uuid == real.uuid
        if output == "csv":
            assert pasted.compute_capability == real.compute_capability


def test_facts_command_reports_the_live_gpus(live: HostFacts) -> None:
    out = subprocess.run(
        [sys.executable, "-c", "from provision.cli import main; main()", "facts", "--json"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    data = json.loads(out)
    assert data["driver"]["version"] == live.driver.version
    assert [g["uuid"] for g in data["gpus"]] == [g.uuid for g in live.gpus]
    assert all(g["compute_capability"] for g in data["gpus"])
