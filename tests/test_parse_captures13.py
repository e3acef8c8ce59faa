"""The shapes capture set 13 read: gpustat's screen, gpustat's and other issue templates' fields,
PyTorch's capability warning on its own, Ollama's "inference compute" line without its prefix,
the driver's CUDA credited to nvidia-smi, a GPU name nvidia-smi's table cut short; and the near
misses beside them that must stay unread."""

from __future__ import annotations

import pytest

from checks.facts.model import Gpu, HostFacts, merge
from checks.facts.parsers import collect_env, driver_prose, env_list, gpustat, ollama
from tests.support.captures import capture_text, gpu_names, read_capture

# --- gpustat --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "driver", "gpu", "count", "mib"),
    [
        (
            "gpustat_8gpu_envform__gpustat-157_8x-rtx4090-535.54.03.txt",
            "535.54.03",
            "NVIDIA GeForce RTX 4090",
            8,
            24564,
        ),
        # after "➜ gpustat", processes "(Not Supported)"
        (
            "gpustat_4gpu_debug__gpustat-138_4x-v100-sxm2-32gb-450.36.06.txt",
            "450.36.06",
            "Tesla V100-SXM2-32GB",
            4,
            32510,
        ),
        # a pynvml warning above the header, the host redacted
        (
            "gpustat_debug_warning_nvsmi_cut__gpustat-168_a10g-535.129.03.txt",
            "535.129.03",
            "NVIDIA A10G",
            1,
            23028,
        ),
        # --debug's traceback and quoted errors above the header
        (
            "gpustat_debug_2gpu_fence__gpustat-161desc_2x-v100-sxm2-32gb-535.54.03.txt",
            "535.54.03",
            "Tesla V100-SXM2-32GB",
            2,
            32768,
        ),
        # before 1.0: 27'C
        (
            "gpustat_apostrophe_c_nvsmi_truncname__gpustat-130_4x-p100-515.65.01.txt",
            "515.65.01",
            "Tesla P100-PCIE-16GB",
            4,
            16384,
        ),
    ],
)
def test_gpustats_screen_gives_the_driver_and_each_gpu(
    name: str, driver: str, gpu: str, count: int, mib: int
) -> None:
    facts = gpustat.parse_gpustat(capture_text(name))
    assert facts.driver.version == driver
    assert [(g.index, g.name, g.memory_total_mib) for g in facts.gpus] == [
        (i, gpu, mib) for i in range(count)
    ]


def test_a_gpustat_screen_pasted_twice_is_each_gpu_once() -> None:
    text = capture_text("gpustat_debug_warning_nvsmi_cut__gpustat-168_a10g-535.129.03.txt")
    assert gpu_names(gpustat.parse_gpustat(text + "\n" + text)) == ["NVIDIA A10G"]


def test_gpustat_beside_a_table_that_cut_the_names_is_each_gpu_once() -> None:
    facts = read_capture("gpustat_apostrophe_c_nvsmi_truncname__gpustat-130_4x-p100-515.65.01.txt")
    assert gpu_names(facts) == ["Tesla P100-PCIE-16GB"] * 4  # the table's "Tesla P100-PCIE..." too
    assert facts.gpus[0].pci_bus_id == "00000000:04:00.0"
    assert facts.driver.cuda_version == "11.7"


@pytest.mark.parametrize(
    "text",
    [
        # the header alone, in a feature request (wookayin/gpustat#165)
        "Hostname                        Sun Oct 22 22:19:07 2023  535.113.01\n",
        # another vendor's GPU
        "host  Mon Aug 22 15:23:57 2022  6.7.0\n"
        "[0] AMD Instinct MI210 | 35°C,   0 % |    10 / 65520 MB |\n",
        # an NVIDIA name without gpustat's cells
        "[0] NVIDIA GeForce RTX 4090 | 50°C\n",
        "[0] NVIDIA GeForce RTX 4090 | 12894 / 24564 MiB |\n",
    ],
)
def test_other_lines_are_no_gpustat_screen(text: str) -> None:
    facts = gpustat.parse_gpustat(text)
    assert not facts.gpus and facts.driver.version is None
    assert not gpustat.detect_gpustat(text)


def test_the_driver_is_the_header_right_above_the_rows() -> None:
    rows = "[0] Tesla P100-PCIE-16GB | 27'C,   0 % |   103 / 16384 MB |\n"
    facts = gpustat.parse_gpustat("gpu-a-11.extreme  515.65.01\n\n" + rows)
    assert gpu_names(facts) == ["Tesla P100-PCIE-16GB"] and facts.driver.version is None


# --- issue templates ------------------------------------------------------------------------------


def test_gpustats_template_names_the_driver_and_the_card() -> None:
    facts = read_capture("issueform_gpustat__gpustat-147_v100-sxm2-510.73.08.txt")
    assert facts.driver.version == "510.73.08"
    assert gpu_names(facts) == ["Tesla V100-SXM2"]


def test_gpustats_template_unfilled_states_nothing() -> None:
    # wookayin/gpustat's bug_report.md as it stands
    text = (
        " - OS: [e.g. Ubuntu 18.04 LTS]\n"
        " - NVIDIA Driver version: [Try `nvidia-smi` or `gpustat`]\n"
        " - The name(s) of GPU card: [can be omitted if screenshot attached]\n"
        " - gpustat version: `gpustat --version`\n"
    )
    assert not env_list.detect_env_list(text)


def test_a_card_named_by_hand_is_the_first_gpu_gpustat_lists() -> None:
    facts = read_capture("gpustat_8gpu_envform__gpustat-157_8x-rtx4090-535.54.03.txt")
    assert [g.index for g in facts.gpus] == list(range(8))
    assert (
        facts.driver.cuda_version == "12.2"
    )  # "...; Driver Version: 535.54.03; CUDA Version: 12.2"


def test_a_full_width_colon_after_nv_driver_version() -> None:
    facts = read_capture("gpustat_debug_envinfo_fullwidth__gpustat-161_h100-535.183.06.txt")
    assert facts.driver.version == "535.183.06"
    assert facts.driver.cuda_version is None  # "- cuda : 12.2" may be the toolkit's


@pytest.mark.parametrize(
    ("name", "gpu", "driver"),
    [
        (
            "lmstudio_hw_fields_lines__lmstudio-1051_rtx3060-580.95.05.txt",
            "NVIDIA GeForce RTX 3060",
            None,
        ),
        ("bold_template_driver_gpu__ogkm-82_rtx3050-515.43.04.txt", "RTX 3050", "515.43.04"),
    ],
)
def test_a_bold_label_over_its_answer_is_a_heading(name: str, gpu: str, driver: str | None) -> None:
    facts = env_list._headings(capture_text(name))
    assert gpu_names(facts) == [gpu] and facts.driver.version == driver


@pytest.mark.parametrize(
    "text",
    [
        # NVIDIA/open-gpu-kernel-modules#53: the old template, unfilled
        "**NVIDIA Driver Version**\nPlease write the version of the NVIDIA driver you are using."
        "\n\n**GPU**\nPlease write the particular model of NVIDIA GPU you are using.\n",
        # lmstudio-ai/lmstudio-bug-tracker#1186: questions, not labels
        "**What is the bug?**\nGPU rtx 5060 Ti 16gb not detected by LM Studio, see screenshot.\n",
        # ggml-org/llama.cpp's form: "Hardware" answered with two machines' GPUs, or a label
        "### Hardware\n\nA100, 3090\n",
        "### Hardware\n\nCard name: NVIDIA Quadro P2000\n",
    ],
)
def test_headings_without_a_plain_answer_state_nothing(text: str) -> None:
    facts = env_list._headings(text)
    assert not facts.gpus and facts.driver.version is None


def test_the_drivers_cuda_credited_to_nvidia_smi() -> None:
    facts = read_capture("ollama_env_laptop_igpu_dropped__ollama-17222_rtx3050-laptop-592.27.txt")
    assert (facts.driver.version, facts.driver.cuda_version) == ("592.27", "13.1")
    # without the credit, the CUDA after a comma may be the toolkit's
    bare = env_list.parse_env_list("- GPU: NVIDIA GeForce RTX 3050\n- Driver: 592.27, CUDA 13.1\n")
    assert bare.driver.version == "592.27" and bare.driver.cuda_version is None


def test_driver_version_in_a_sentence() -> None:
    text = capture_text("lmstudio_prose_driver__lmstudio-1186_rtx5060ti-581.57.txt")
    assert driver_prose.parse_driver_prose(text).driver.version == "581.57"
    facts = read_capture("lmstudio_prose_driver__lmstudio-1186_rtx5060ti-581.57.txt")
    assert [g.name for g in facts.gpus] == ["rtx 5060 Ti"]  # "GPU rtx 5060 Ti 16gb not detected"
    # a branch (GoogleCloudPlatform/compute-gpu-installation#4), and a change
    for line in (
        "Presently this is Nvidia driver version 510, which currently has an issue on GCE.",
        "Downgrading to driver version 470.82.01 fixed it.",
    ):
        assert driver_prose.parse_driver_prose(line).driver.version is None


# --- PyTorch's capability warning -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "gpu", "capability"),
    [
        ("torch_capability_warning__pytorch-172629_gb10.txt", "NVIDIA GB10", "12.1"),
        # re-logged on one line
        ("torch_capability_warning_one_line__sparkvllm-15_gb10.txt", "NVIDIA GB10", "12.1"),
        # the too-old wording, quoted
        ("torch_too_old_warning_quoted__pytorch-16712_gtx670m.txt", "GeForce GTX 670M", "2.1"),
    ],
)
def test_the_capability_warning_alone_names_the_gpu(name: str, gpu: str, capability: str) -> None:
    text = capture_text(name)
    assert collect_env.detect_collect_env(text)
    facts = collect_env.parse_collect_env(text)
    assert [(g.index, g.name, g.compute_capability) for g in facts.gpus] == [(0, gpu, capability)]


def test_one_gpu_warned_about_twice_is_one_and_three_indexes_are_three() -> None:
    text = capture_text("torch_capability_warning__pytorch-172629_gb10.txt")
    assert gpu_names(collect_env.parse_collect_env(text + text)) == ["NVIDIA GB10"]
    # three GPUs of one name, each warned about (as in vllm-project/vllm#18818's log)
    three = "".join(
        f"    Found GPU{i} NVIDIA TITAN V which is of cuda capability 7.0.\n"
        "    PyTorch no longer supports this GPU because it is too old.\n"
        for i in range(3)
    )
    assert [g.index for g in collect_env.parse_collect_env(three).gpus] == [0, 1, 2]


@pytest.mark.parametrize(
    "text",
    [
        # the template printed unformatted, in a pasted console (old torch on Windows)
        "UserWarning:\n    Found GPU%d %s which is of cuda capability %d.%d.\n"
        "    PyTorch no longer supports this GPU because it is too old.\n",
        # an old ROCm build warned about a Radeon, with a made-up capability
        "    Found GPU0 Ellesmere [Radeon RX 470/480/570/570X/580/580X] which is of cuda"
        " capability 3.0.\n    PyTorch no longer supports this GPU because it is too old.\n",
        # the sentence alone, in prose
        "Found GPU0 NVIDIA GB10 which is of cuda capability 12.1, is that expected?\n",
    ],
)
def test_other_found_gpu_lines_are_no_warning(text: str) -> None:
    assert not collect_env.detect_collect_env(text)


# --- Ollama's inference compute line without its prefix -------------------------------------------


def test_an_inference_compute_line_without_its_prefix() -> None:
    facts = read_capture("ollama_env_indented_inference_compute__ollama-13338_rtx5090-591.44.txt")
    assert (facts.driver.version, facts.driver.cuda_version) == ("591.44", "13.0")
    # the example line ("id=GPU-xxxx") above the real one is the same GPU, not a second one
    assert gpu_names(facts) == ["NVIDIA GeForce RTX 5090"]
    assert facts.gpus[0].uuid == "GPU-7345c94c-464c-a8ab-fa48-9229002dda06"


def test_an_example_inference_compute_line_is_no_log() -> None:
    example = '    inference compute id=GPU-xxxx library=CUDA name="NVIDIA GeForce RTX 5090"\n'
    assert not ollama.detect_ollama(example)
    assert not ollama.parse_ollama(example).gpus


# --- merging what several outputs name ------------------------------------------------------------


def _merged(*outputs: list[Gpu]) -> list[Gpu]:
    facts = HostFacts()
    for found in outputs:
        merge(facts, HostFacts(gpus=found))
    return facts.gpus


def test_a_name_cut_short_by_the_table_is_the_whole_name_at_that_index() -> None:
    table = [Gpu(index=0, name="Tesla P100-PCIE", pci_bus_id="00000000:04:00.0")]
    listed = [Gpu(index=0, name="Tesla P100-PCIE-16GB"), Gpu(index=1, name="Tesla P100-PCIE-16GB")]
    merged = _merged(table, listed)
    assert gpu_names(HostFacts(gpus=merged)) == ["Tesla P100-PCIE-16GB"] * 2
    assert merged[0].pci_bus_id == "00000000:04:00.0"


def test_names_that_only_share_a_start_stay_apart() -> None:
    bus = "00000000:04:00.0"
    # too short a start to be a cut name
    short = _merged(
        [Gpu(index=0, name="NVIDIA", pci_bus_id=bus)], [Gpu(index=0, name="NVIDIA A10G")]
    )
    assert len(short) == 2
    # another index
    table = [Gpu(index=0, name="Tesla P100-PCIE", pci_bus_id=bus)]
    assert len(_merged(table, [Gpu(index=1, name="Tesla P100-PCIE-16GB")])) == 2


def test_gpus_named_by_hand_are_the_ones_a_tool_lists_under_that_name() -> None:
    by_hand = [Gpu(name="NVIDIA GeForce RTX 4090"), Gpu(name="NVIDIA GeForce RTX 4090")]
    tool = [Gpu(index=i, name="NVIDIA GeForce RTX 4090") for i in range(3)]
    assert [g.index for g in _merged(by_hand, tool)] == [0, 1, 2]
    # another name stays another GPU
    assert len(_merged([Gpu(name="RTX 4090")], [Gpu(index=0, name="NVIDIA GeForce RTX 4090")])) == 2
