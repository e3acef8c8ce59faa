"""Shapes of pasted captures beyond one tool's output: per-host prefixes from pdsh, clush and
ansible, and excerpts cut mid-table or mid-name, which give partial facts and never wrong ones.

The texts are real captures from tests/fixtures/corpus/captures/, wrapped the way the tools wrap
each host's lines, or cut where a paste can end.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from checks.facts import capture, gpus
from checks.facts.parsers import (
    collect_env,
    containers,
    gpu_topology,
    jetson,
    kernel,
    packages,
    pci,
    vulkan,
    warp,
)
from tests.test_corpus_captures import CAPTURES, read, read_facts

TABLE = "nvsmi_table_580__dra-driver-pr889_t4-580.126.09.txt"  # 580.126.09, 13.0, Tesla T4
OTHER = "nvsmi_table_k8s-pod__llm-d-deployer-282_rtx5070-570.133.07.txt"


def _lines(name: str) -> list[str]:
    return (CAPTURES / name).read_text().splitlines()


def _facts(tmp_path: Path, text: str) -> dict[str, Any]:
    path = tmp_path / "paste.txt"
    path.write_text(text)
    return read_facts(path)


def _prefixed(host: str, lines: list[str]) -> list[str]:
    return [f"{host}: {line}" for line in lines]


def test_one_pdsh_host_reads_as_its_output_alone(tmp_path: Path) -> None:
    plain = read(read_facts(CAPTURES / TABLE))
    assert plain[0] == "580.126.09"
    assert read(_facts(tmp_path, "\n".join(_prefixed("gpu-node01", _lines(TABLE))))) == plain


def test_several_hosts_give_the_first_hosts_facts_and_say_so(tmp_path: Path) -> None:
    text = _prefixed("node01", _lines(TABLE)) + _prefixed("node02", _lines(OTHER))
    facts = _facts(tmp_path, "\n".join(text))
    assert read(facts) == read(read_facts(CAPTURES / TABLE))
    notes = [p["detail"] for p in facts["probes"] if p["name"].startswith("hosts in ")]
    assert notes == ["the output of node01 only; not read: node02"]


def test_interleaved_hosts_keep_only_the_first_hosts_lines() -> None:
    """pdsh prints each host's lines as they arrive: bursts of several lines, interleaved."""
    first, second = _lines(TABLE), _lines(OTHER)
    mixed: list[str] = []
    for start in range(0, max(len(first), len(second)), 4):
        mixed += _prefixed("n1", first[start : start + 4]) + _prefixed(
            "n2", second[start : start + 4]
        )
    text, hosts = capture.one_host("\n".join(mixed))
    assert hosts == ["n1", "n2"]
    assert text == "\n".join(first)


def test_ansible_shell_output_reads_the_first_host(tmp_path: Path) -> None:
    text = ["gpu1 | CHANGED | rc=0 >>", *_lines(TABLE), "gpu2 | CHANGED | rc=0 >>", *_lines(OTHER)]
    facts = _facts(tmp_path, "\n".join(text))
    assert read(facts) == read(read_facts(CAPTURES / TABLE))
    assert any(p["detail"] == "the output of gpu1 only; not read: gpu2" for p in facts["probes"])


@pytest.mark.parametrize(
    "text",
    [
        "NVRM: loading NVIDIA UNIX x86 Kernel Module  285.03\n" * 3,  # the kernel's prefix
        "llama_model_loader: - kv   0: a\n" * 3,  # llama.cpp's function names
        "main: build = 1\n" * 3,  # a word, not a host name
        "node01: a\nnode01: b\nother\nnode01: c\n",  # never three lines in a row
    ],
)
def test_prefixes_that_are_not_hosts_stay(text: str) -> None:
    assert capture.one_host(text) == (text, [])


def test_a_table_cut_inside_the_gpu_row_keeps_the_header_facts(tmp_path: Path) -> None:
    lines = _lines(OTHER)
    row = next(i for i, line in enumerate(lines) if "RTX 5070" in line)
    cut = [*lines[:row], lines[row][: lines[row].index("RTX 50") + len("RTX 50")]]
    assert read(_facts(tmp_path, "\n".join(cut))) == ("570.133.07", "12.8", [], [])


def test_a_truncated_gpu_name_is_not_completed_to_another_gpu(tmp_path: Path) -> None:
    lines = _lines(OTHER)
    row = next(i for i, line in enumerate(lines) if "RTX 5070" in line)
    lines[row] = lines[row].replace("NVIDIA GeForce RTX 5070   ", "NVIDIA GeForce RTX 50...")
    facts = _facts(tmp_path, "\n".join(lines))
    assert read(facts)[2:] == (["NVIDIA GeForce RTX 50"], [None])


def test_lspci_names_cut_inside_a_bracket_are_unknown() -> None:
    text = "01:00.0 VGA compatible controller [0300]: NVIDIA Corporation GB202 [GeForce RTX 50"
    gpu = pci.parse_lspci(text).gpus[0]
    assert (gpu.name, gpu.pci_bus_id, gpu.pci_device_id) == (None, "01:00.0", None)


def test_lspci_skips_functions_that_are_not_gpus() -> None:
    text = (
        "01:00.1 Audio device [0403]: NVIDIA Corporation GA102 High Definition Audio Controller"
        " [10de:1aef] (rev a1)\n"
        "07:00.0 Bridge [0680]: NVIDIA Corporation GH100 [H100 NVSwitch] [10de:22a3] (rev a1)\n"
    )
    assert not pci.detect_lspci(text)
    assert pci.parse_lspci(text).gpus == []


def test_vulkan_devices_run_by_mesa_give_no_driver_version() -> None:
    text = (
        "GPU0:\n\tapiVersion         = 1.3.289\n\tdriverVersion      = 24.2.0\n"
        "\tvendorID           = 0x10de\n"
        "\tdeviceName         = NVIDIA GeForce RTX 3060 (NVK GA106)\n"
        "\tdriverID           = DRIVER_ID_MESA_NVK\n\tdriverInfo         = Mesa 24.2.0\n"
    )
    facts = vulkan.parse_vulkaninfo(text)
    assert facts.driver.version is None
    assert [g.name for g in facts.gpus] == ["NVIDIA GeForce RTX 3060 (NVK GA106)"]


def test_vulkan_summary_takes_nvidias_driver_info() -> None:
    text = (
        "GPU0:\n\tdriverVersion      = 550.54.14.0\n\tvendorID           = 0x10de\n"
        "\tdeviceName         = NVIDIA GeForce RTX 4090\n"
        "\tdriverID           = DRIVER_ID_NVIDIA_PROPRIETARY\n\tdriverInfo         = 550.54.14\n"
        "GPU1:\n\tdriverVersion      = 0.0.1\n\tvendorID           = 0x10005\n"
        "\tdeviceName         = llvmpipe (LLVM 15.0.7, 256 bits)\n"
    )
    facts = vulkan.parse_vulkaninfo(text)
    assert facts.driver.version == "550.54.14"
    assert [g.name for g in facts.gpus] == ["NVIDIA GeForce RTX 4090"]


def test_warp_without_its_banner_is_not_read() -> None:
    text = '     "cuda:0"   : "NVIDIA GeForce RTX 5090" (32 GiB, sm_120, mempool enabled)\n'
    assert not warp.detect_warp(text)
    assert warp.parse_warp(text).gpus == []


def test_docker_runtime_lines_with_the_nvidia_runtime() -> None:
    text = " Runtimes: io.containerd.runc.v2 nvidia runc\n Default Runtime: nvidia\n"
    docker = containers.parse_docker_runtime_lines(text).containers.docker
    assert docker is not None
    assert (docker.runtimes, docker.default_runtime) == (
        ["io.containerd.runc.v2", "nvidia", "runc"],
        "nvidia",
    )


def test_jetsoninfo_gives_the_l4t_release_and_a_known_jetpack() -> None:
    """jetsonhacks/jetsonUtilities' jetsonInfo.py: " L4T 32.4.2 [ JetPack UNKNOWN ]"."""
    unknown = jetson.parse_jetson_release(" NVIDIA Jetson TX2\n L4T 32.4.2 [ JetPack UNKNOWN ]\n")
    assert (unknown.system.l4t_release, unknown.system.jetpack_release) == ("32.4.2", None)
    known = jetson.parse_jetson_release(" L4T 32.4.4 [ JetPack 4.4.1 ]\n")
    assert (known.system.l4t_release, known.system.jetpack_release) == ("32.4.4", "4.4.1")
    assert not jetson.detect_jetson_release("L4T 32.4.2 is what I run, JetPack 4.4\n")


def test_template_gpu_line_reads_a_catalogued_name_and_its_driver() -> None:
    """PyTorch's old bug-report template as filled in (pytorch/pytorch#51840)."""
    text = " - GPU models and configuration: GeForce RTX 2070, driver 450.102.04\n"
    facts = collect_env.parse_template_gpu(text)
    assert [g.name for g in facts.gpus] == ["GeForce RTX 2070"]
    assert facts.driver.version == "450.102.04"
    alone = collect_env.parse_template_gpu("- GPU models and configuration: Tesla V100\n")
    assert ([g.name for g in alone.gpus], alone.driver.version) == (["Tesla V100"], None)


@pytest.mark.parametrize(
    "line",
    [
        " - GPU models and configuration:",  # left empty
        " - GPU models and configuration: 2x RTX 3090, driver 535.54",  # not a bare name
        " - GPU models and configuration: GeForce something new",  # not in the catalogue
        "GPU models and configuration: GeForce RTX 2070",  # collect_env's own line, no bullet
    ],
)
def test_template_gpu_line_leaves_what_it_cannot_read(line: str) -> None:
    assert not collect_env.detect_template_gpu(line + "\n")
    assert collect_env.parse_template_gpu(line + "\n").gpus == []


def test_dnf_list_installed_gives_the_driver_packages_version() -> None:
    """negativo17/nvidia-driver#31: Fedora's packages, epoch and release, no repository column."""
    text = (
        'dnf list installed "*nvidia*"\nInstalled Packages\n'
        "akmod-nvidia.x86_64                       2:387.34-1.fc27\n"
        "kmod-nvidia-4.14.5-300.fc27.x86_64.x86_64 2:387.34-1.fc27\n"
        "nvidia-driver.x86_64                      2:387.34-1.fc27\n"
    )
    assert packages.detect_packages(text)
    assert packages.parse_packages(text).driver.version == "387.34"
    with_repo = "xorg-x11-drv-nvidia.x86_64   3:550.78-1.fc40   @rpmfusion-nonfree-updates\n"
    assert packages.parse_packages(with_repo).driver.version == "550.78"


@pytest.mark.parametrize(
    "text",
    [
        "akmod-nvidia.x86_64   2:387.34-1.fc27\n",  # the module's builder, not the driver
        "nvidia-driver-cuda.x86_64   2:387.34-1.fc27\n",  # a part, not the driver package
        "nvidia-driver.x86_64 is what I installed, 387.34\n",  # prose
        "nvidia-driver.x86_64\n",  # the version wrapped onto the next line
    ],
)
def test_dnf_lines_that_are_not_the_driver_package_give_nothing(text: str) -> None:
    assert not packages.detect_packages(text)
    assert packages.parse_packages(text).driver.version is None


@pytest.mark.parametrize(
    ("text", "client", "module"),
    [
        (  # the older wording, dmesg's continuation lines (negativo17/nvidia-driver#43)
            "NVRM: API mismatch: the client has the version 390.25, but\n"
            "NVRM: this kernel module has the version 390.12.  Please\n"
            "NVRM: make sure that this kernel module and all NVIDIA driver\n"
            "NVRM: components have the same version.\n",
            "390.25",
            "390.12",
        ),
        (  # the newer wording names the client (NVIDIA/open-gpu-kernel-modules#829)
            "Apr 19 12:34:42 Kyrios kernel: NVRM: API mismatch: the client 'nvidia-powerd'"
            " (pid 849)\n"
            + " " * 31
            + "NVRM: has the version 570.133.07, but this kernel module has\n"
            + " " * 31
            + "NVRM: the version 575.51.02.  Please make sure that this\n",
            "570.133.07",
            "575.51.02",
        ),
        (  # syslog writes the line breaks as #012 (stackhpc/ansible-slurm-appliance#287)
            "Jun 30 11:07:05 gpu-0 kernel: NVRM: API mismatch: the client has the version"
            " 535.54.03, but#012NVRM: this kernel module has the version 530.30.02.  Please#012",
            "535.54.03",
            "530.30.02",
        ),
    ],
)
def test_the_kernels_api_mismatch_gives_both_versions(
    tmp_path: Path, text: str, client: str, module: str
) -> None:
    driver = _facts(tmp_path, text)["driver"]
    assert (driver["version"], driver["kernel_module_version"]) == (client, module)


@pytest.mark.parametrize(
    "text",
    [
        "NVRM: API mismatch: the client 'Xorg' (pid 812)\n",  # cut before the versions
        "NVRM: API mismatch: the client has the version 390.25, but\n",  # the module's is cut
        "I saw an API mismatch: the client has the version 390.25, but this kernel module has"
        " the version 390.12.\n",  # quoted in prose without the kernel's prefix
    ],
)
def test_an_api_mismatch_without_both_versions_gives_neither(text: str) -> None:
    assert not kernel.detect_api_mismatch(text)
    facts = kernel.parse_api_mismatch(text)
    assert (facts.driver.version, facts.driver.kernel_module_version) == (None, None)


@pytest.mark.parametrize(
    ("name", "cc"),
    [
        ("Tesla K80", "3.7"),
        ("Quadro M1000M", "5.0"),
        ("Quadro M2000M", "5.0"),
        ("Quadro M1200", "5.0"),
        ("Quadro M5500M", None),  # NVIDIA's list has it at 5.2, not with the other mobile parts
        ("Quadro M2000", "5.2"),  # the desktop part (GM206), its own entry
    ],
)
def test_legacy_gpus_in_the_catalogue(name: str, cc: str | None) -> None:
    model = gpus.lookup(name)
    assert (model.compute_capability if model else None) == cc


# --- capture set 3: shapes its unseen pastes showed -----------------------------------------------

DQ_LATER = "devicequery_multi__aikitoria-ogkm-1_rtx5090-dev2.txt"
DQ_RETYPED = "devicequery_annotated_zh__chiemon-blog_tesla-t4.txt"
L_CUT = "nvsmi_procs_L-cut__nvitop-pr8_a100-80gb.txt"
MIG_CUT_BUS = "nvsmi_table_mig_redacted__dcgm-152_a100-80gb-535.104.05.txt"


def test_a_device_query_pasted_from_a_later_device_is_read() -> None:
    facts = read_facts(CAPTURES / DQ_LATER)
    assert read(facts) == (None, "12.8", ["NVIDIA GeForce RTX 5090"], ["12.0"])
    assert [gpu["index"] for gpu in facts["gpus"]] == [2]


def test_a_retyped_device_query_with_curly_quotes_and_notes_is_read() -> None:
    facts = read_facts(CAPTURES / DQ_RETYPED)
    assert read(facts) == (None, "11.0", ["Tesla T4"], ["7.5"])
    assert facts["gpus"][0]["memory_total_mib"] == 15110


@pytest.mark.parametrize(
    "text",
    [
        'Device 0: "GeForce GTX 1080"\nTotal amount of global memory: 8105 MBytes\n',
        'see Device 0: "GeForce GTX 1080"\n  CUDA Capability Major/Minor version number:    6.1\n',
        "Device 0: \u201cTesla T4\u201dx\nCUDA Capability Major/Minor version number: 7.5\n",
        'CUDA Capability Major/Minor version number: 6.1\nDevice 0: "GeForce GTX 1080"\n',
    ],
)
def test_device_query_lines_without_its_own_shape_give_no_gpu(text: str) -> None:
    from checks.facts.parsers import cuda_samples

    assert not cuda_samples.detect_device_query(text)


def test_an_nvidia_smi_list_cut_before_the_uuid_is_read() -> None:
    facts = read_facts(CAPTURES / L_CUT)
    assert read(facts) == (None, None, ["NVIDIA A100-SXM4-80GB"], ["8.0"])
    assert facts["gpus"][0]["uuid"] is None


@pytest.mark.parametrize(
    "text",
    [
        # No command line: another tool's "GPU 0: NAME" (sglang, collect_env) is not -L.
        "GPU 0: NVIDIA A100-SXM4-80GB\n",
        # Something follows the cut line, so it is not where the paste ends.
        "$ nvidia-smi -L\nGPU 0: NVIDIA A100-SXM4-80GB\nthen it hangs\n",
        # The command with other options lists something else.
        "$ nvidia-smi -L -i 0 --query\nGPU 0: NVIDIA A100-SXM4-80GB\n",
    ],
)
def test_uuid_less_gpu_lines_elsewhere_are_not_read(text: str) -> None:
    from checks.facts.parsers import nvidia_smi

    assert nvidia_smi.parse_list(text).gpus == []


def test_a_cut_list_may_end_at_its_code_fence() -> None:
    """The closing fence of a markdown block ends the list; prose may follow it."""
    from checks.facts.parsers import nvidia_smi

    text = "```\n$ nvidia-smi -L\nGPU 0: NVIDIA A100-SXM4-80GB\n```\nThen it hangs.\n"
    assert [g.name for g in nvidia_smi.parse_list(text).gpus] == ["NVIDIA A100-SXM4-80GB"]


def test_a_gpu_row_with_a_bus_id_cut_by_hand_is_still_a_gpu() -> None:
    facts = read_facts(CAPTURES / MIG_CUT_BUS)
    assert read(facts) == ("535.104.05", "12.2", ["NVIDIA A100-SXM4-80GB"], ["8.0"])
    assert facts["gpus"][0]["index"] == 3 and facts["gpus"][0]["pci_bus_id"] is None


@pytest.mark.parametrize(
    "row",
    [
        "|   3  NVIDIA A100-SXM4-80GB          On  | hello: Off |                   On |",
        "|   3  NVIDIA A100-SXM4-80GB          On  | 00000000: Maybe |                 On |",
        "|   3  NVIDIA A100-SXM4-80GB          On  | 00: Off |                        On |",
    ],
)
def test_rows_whose_second_cell_is_not_a_bus_id_are_not_gpu_rows(row: str) -> None:
    from checks.facts.parsers import nvidia_smi

    assert nvidia_smi.parse_table(row + "\n").gpus == []


def test_dpkg_reads_held_driver_packages_nvcc_and_cuda_compat() -> None:
    """`apt-mark hold` turns a driver's "ii" into "hi"; the toolkit and compat rows are from an
    H100 VM's `dpkg -l | grep cuda` (tests/fixtures/corpus/captures/dpkg_cuda13__h100-vm_*)."""
    text = (
        "hi  nvidia-driver-535      535.183.01-0ubuntu0.22.04.1  amd64  NVIDIA driver metapackage\n"
        "ii  cuda-compat-13-0       580.95.05-0ubuntu1           amd64  CUDA Compatibility\n"
        "ii  cuda-nvcc-13-0         13.0.88-1                    amd64  CUDA nvcc\n"
        "rc  cuda-nvcc-12-4         12.4.131-1                   amd64  CUDA nvcc\n"
    )
    assert packages.detect_packages(text)
    facts = packages.parse_packages(text)
    assert facts.driver.version == "535.183.01"
    assert [(t.version, t.release) for t in facts.toolkits] == [("13.0.88", "13.0")]
    assert [(c.driver_version, c.package) for c in facts.compat] == [
        ("580.95.05", "cuda-compat-13-0")
    ]
    dnf = "cuda-nvcc-12-8.x86_64   12.8.93-1   @cuda-rhel9-x86_64\n"
    assert [t.version for t in packages.parse_packages(dnf).toolkits] == ["12.8.93"]


@pytest.mark.parametrize(
    "text",
    [
        "rc  cuda-nvcc-12-4   12.4.131-1   amd64  CUDA nvcc\n",  # removed, config files left
        "ii  cuda-nvcc-12-4   13.0.88-1    amd64  CUDA nvcc\n",  # version of another release
        "ii  cuda-nvcc-dev-12-4   12.4.131-1   amd64  CUDA nvcc\n",  # not the compiler package
        "un  cuda-compat-12-4   <none>   <none>  (no description available)\n",
    ],
)
def test_package_rows_that_are_not_an_installed_nvcc_or_compat_give_nothing(text: str) -> None:
    facts = packages.parse_packages(text)
    assert not facts.toolkits and not facts.compat


def test_topology_matrix_gpus_merge_by_place_with_outputs_that_give_no_index() -> None:
    """The topology matrix (indices only) pasted with `lspci -nnk` (names and bus ids, no index)
    from the same two-RTX-3090 host (noonghunna/club-3090#1229 and PR 594) is two GPUs, not four."""
    topology = (CAPTURES / "nvsmi_topo_m_tabs__club-3090-1229_2gpu.txt").read_text()
    lspci = (CAPTURES / "lspci_nnk_grep__club-3090-pr594_2x-rtx3090.txt").read_text()
    facts, _ = capture.recognise(capture.clean(lspci + "\n" + topology))
    named, _ = capture.recognise(capture.clean(lspci))
    assert [g.pci_bus_id for g in named.gpus] == ["05:00.0", "0a:00.0"]
    assert [(g.index, g.name, g.pci_bus_id) for g in facts.gpus] == [
        (0, named.gpus[0].name, "05:00.0"),
        (1, named.gpus[1].name, "0a:00.0"),
    ]
    alone, _ = capture.recognise(capture.clean(topology))
    assert [(g.index, g.name) for g in alone.gpus] == [(0, None), (1, None)]


@pytest.mark.parametrize(
    "text",
    [
        "\tGPU0\tGPU1\tCPU Affinity\n",  # a header without its rows
        "\tGPU0\tGPU1\tCPU Affinity\nGPU0\tPHB\tPHB\t0-63\n",  # no row marks itself
        "GPU0: NVIDIA GeForce RTX 3090 X\n",  # another tool's GPU line
    ],
)
def test_text_that_only_looks_like_a_topology_matrix_gives_no_gpu(text: str) -> None:
    assert gpu_topology.parse_gpu_topology(text).gpus == []
    assert not gpu_topology.detect_gpu_topology(text)
