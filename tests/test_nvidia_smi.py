"""nvidia-smi parsers: detection, robustness on any input, and the probe."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pytest

from checks.facts.model import HostFacts
from checks.facts.parsers import nvidia_smi
from tests.conftest import FIXTURES, REAL

PARSERS: list[Callable[[str], HostFacts]] = [
    nvidia_smi.parse_table,
    nvidia_smi.parse_query_csv,
    nvidia_smi.parse_query_text,
    nvidia_smi.parse_query_grep,
    nvidia_smi.parse_query_head,
    nvidia_smi.parse_xml,
    nvidia_smi.parse_list,
    nvidia_smi.parse_version,
    nvidia_smi.parse_errors,
    nvidia_smi.parse_version_line,
    nvidia_smi.parse_probe,
]
CAPTURES = FIXTURES / "captures" / "nvidia_smi"
ALL_FILES = sorted(p for p in [*REAL.iterdir(), *CAPTURES.iterdir()] if p.is_file())


def _garbage() -> list[str]:
    rng = random.Random(1234)
    texts = ["", "\n", "\r\n\r\n", "|" * 10, "," * 50, "GPU 0:", "<nvidia_smi_log>", "x" * 200_000]
    texts += [
        bytes(rng.randrange(256) for _ in range(2000)).decode(errors="replace") for _ in range(20)
    ]
    texts.append("| NVIDIA-SMI 1.2 Driver Version: CUDA Version: |\n|   0  " + "A" * 50_000)
    texts.append("<?xml version='1.0'?><nvidia_smi_log><gpu id='x'><product_name>")
    texts.append("index, name\n" + "0, a, b, c\n" * 100 + "zz, 1\n")
    texts.append("GPU 00000000:01:00.0\n    FB Memory Usage\n        Total : lots MiB\n")
    return texts


@pytest.mark.parametrize("text", _garbage(), ids=lambda t: f"len{len(t)}")
def test_parsers_and_detectors_never_raise_on_garbage(text: str) -> None:
    for parse in PARSERS:
        assert isinstance(parse(text), HostFacts)
    for fmt in nvidia_smi.FORMATS:
        assert isinstance(fmt.detect(text), bool)


@pytest.mark.parametrize("path", ALL_FILES, ids=lambda p: p.name)
def test_parsers_never_raise_on_real_files(path: Path) -> None:
    text = path.read_text(errors="replace")
    for parse in PARSERS:
        assert isinstance(parse(text), HostFacts)
    for fmt in nvidia_smi.FORMATS:
        fmt.detect(text)


def test_one_format_per_parser() -> None:
    names = [fmt.name for fmt in nvidia_smi.FORMATS]
    assert len(names) == len(set(names)) == 10
    parses = {fmt.parse for fmt in nvidia_smi.FORMATS}
    assert parses == set(PARSERS) - {nvidia_smi.parse_probe}


@pytest.mark.parametrize(
    ("filename", "expected"),
    [
        ("nvsmi_table__muscles-codebook_8x-v100s_535.171.04.txt", {"nvidia-smi table"}),
        ("err_nokernel_vllm__vllm-18995_rtx5090-docker.txt", {"nvidia-smi table"}),
        ("nvsmi_xml__telegraf_rtx-3060-v12.xml", {"nvidia-smi -q -x"}),
        (
            "nvsmi_query-csv_L__triton-pr8070_titanv-rtx5880ada_570.86.15.txt",
            {"nvidia-smi --query-gpu CSV", "nvidia-smi -L"},
        ),
        ("err_nvml-mismatch__tinygrad-ogkm-47.txt", {"nvidia-smi errors"}),
        ("err804__vllm-4940_docker-run.txt", set()),
        ("llamacpp_init_sysinfo__ggml-pr14363_rtx4070super.txt", set()),
        ("err_sm120_collect-env__pytorch-150733_rtx5090D.txt", set()),
    ],
)
def test_detect_is_specific(filename: str, expected: set[str]) -> None:
    text = (REAL / filename).read_text(errors="replace")
    assert {fmt.name for fmt in nvidia_smi.FORMATS if fmt.detect(text)} == expected


def test_a_log_that_mentions_nvidia_smi_is_not_a_table() -> None:
    text = "I ran nvidia-smi and it showed the GPU; Driver Version looked fine.\nGPU 0 is busy\n"
    assert not any(fmt.detect(text) for fmt in nvidia_smi.FORMATS)


def test_table_rows_are_found_with_every_fixture_header() -> None:
    for path in REAL.glob("nvsmi_table__*.txt"):
        facts = nvidia_smi.parse_table(path.read_text())
        assert facts.driver.version and facts.driver.cuda_version, path.name
        assert facts.gpus and all(g.pci_bus_id and g.name for g in facts.gpus), path.name


def test_windows_table_row_has_no_persistence_mode() -> None:
    text = (
        "| NVIDIA-SMI 566.36        Driver Version: 566.36         CUDA Version: 12.7     |\n"
        "|   0  NVIDIA GeForce RTX 4070 ...  WDDM  |   00000000:01:00.0  On |           N/A |\n"
        "| N/A   42C    P8              2W /   55W |       0MiB /   8188MiB |   0%   Default |\n"
    )
    (gpu,) = nvidia_smi.parse_table(text).gpus
    assert gpu.name == "NVIDIA GeForce RTX 4070"
    assert gpu.persistence_mode is None
    assert gpu.memory_total_mib == 8188


def test_query_csv_ignores_other_queries() -> None:
    text = (
        "$ nvidia-smi --query-compute-apps=pid,process_name,used_gpu_memory --format=csv\n"
        "pid, process_name, used_gpu_memory [MiB]\n"
        "1234, python, 770 MiB\n"
    )
    assert nvidia_smi.parse_query_csv(text).gpus == []


def test_query_csv_gigabyte_units() -> None:
    text = "name, memory.total [GiB]\nNVIDIA H200, 140 GiB\n"
    (gpu,) = nvidia_smi.parse_query_csv(text).gpus
    assert gpu.memory_total_mib == 140 * 1024


def test_errors_other_nvml_failure() -> None:
    facts = nvidia_smi.parse_errors("Failed to initialize NVML: Unknown Error\n")
    assert facts.driver.nvml_error == "Unknown Error"


def test_version_of_old_format_has_no_kmd_line() -> None:
    facts = nvidia_smi.parse_version(
        "NVIDIA-SMI version  : 550.54.14\nNVML version        : 550.54\n"
        "DRIVER version      : 550.54.14\nCUDA Version        : 12.4\n"
    )
    assert (facts.driver.version, facts.driver.cuda_version) == ("550.54.14", "12.4")


def test_probe_shape() -> None:
    (probe,) = nvidia_smi.PROBES
    assert probe.name == "nvidia-smi"
    assert probe.requires == "nvidia-smi"
    for field in ("index", "name", "pci.bus_id", "uuid", "serial", "compute_cap", "memory.total"):
        assert field in probe.command
    assert "--query-gpu=" + ",".join(nvidia_smi.PROBE_FIELDS_OLD) in probe.command
    assert "compute_cap" not in nvidia_smi.PROBE_FIELDS_OLD


def test_probe_falls_back_when_compute_cap_is_rejected() -> None:
    output = (
        "=== gpuprov:query-gpu ===\n"
        'Field "compute_cap" is not a valid field to query.\n\n'
        "index, name, pci.bus_id, uuid, serial, memory.total [MiB], driver_version, "
        "persistence_mode, mig.mode.current\n"
        "0, Tesla T4, 00000000:00:04.0, GPU-0a1b2c3d-0000-1111-2222-333344445555, "
        "1234567890123, 15360 MiB, 470.82.01, Disabled, [N/A]\n"
        "=== gpuprov:query ===\n"
        "Driver Version                            : 470.82.01\n"
        "CUDA Version                              : 11.4\n"
        "GPU 00000000:00:04.0\n"
        "    Product Name                          : Tesla T4\n"
        "    Product Brand                         : NVIDIA\n"
        "    Product Architecture                  : Turing\n"
    )
    facts = nvidia_smi.parse_probe(output)
    assert facts.driver.version == "470.82.01"
    assert facts.driver.cuda_version == "11.4"
    (gpu,) = facts.gpus
    assert (gpu.index, gpu.name, gpu.architecture, gpu.brand) == (0, "Tesla T4", "Turing", "NVIDIA")
    assert gpu.compute_capability is None
    assert gpu.memory_total_mib == 15360
