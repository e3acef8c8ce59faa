"""ollama's log lines that name no GPU stay unread (the real lines are recorded cases under
tests/fixtures/probes/ollama/)."""

from __future__ import annotations

import pytest

from checks.facts.parsers.ollama import detect_ollama, parse_ollama

COMPUTE = (
    'time=2026-08-16T00:44:19.227+12:00 level=INFO source=types.go:32 msg="inference compute"'
    ' library=CUDA compute=6.1 name=CUDA1 description="Quadro P6000" driver=13.0 {}\n'
)


@pytest.mark.parametrize(
    "where",
    [
        "",  # no id at all
        "id=1",  # an index without the PCI address beside it
        "id=cpu pci_id=0000:0d:00.0",  # an id that is neither a UUID nor an index
        "id=1 pci_id=unknown",
    ],
)
def test_an_inference_compute_line_without_a_gpu_address_names_no_gpu(where: str) -> None:
    assert parse_ollama(COMPUTE.format(where)).gpus == []


def test_a_driver_warning_without_an_nvidia_device_or_branch_reads_nothing() -> None:
    text = 'msg="NVIDIA driver too old" device="AMD Radeon" compute=6.1 driver=unknown\n'
    assert detect_ollama(text)
    facts = parse_ollama(text)
    assert facts.gpus == [] and facts.driver.version is None
