"""One-line " | " reports, InvokeAI's torch device and form, a graphics card report, Jetson helper
scripts' L4T lines, the open-gpu-kernel-modules form's version, a GPU named with its driver in a
list item and vGPU types in the catalogue; and the near misses that must stay unread."""

from __future__ import annotations

import pytest

from checks.facts import gpus
from checks.facts.parsers import (
    card_report,
    gpu_driver_item,
    invokeai,
    jetson_scripts,
    open_kmod_form,
    pipe_report,
)
from tests.conftest import FIXTURES
from tests.support.captures import gpu_models, read_capture, read_paste

CAPTURES = FIXTURES / "corpus" / "captures"


# --- the captures ------------------------------------------------------------------------------


def test_a_one_line_report_names_the_gpu_and_its_capability() -> None:
    facts = read_capture("pipe_env_oneliner_comfy_log__flashvsr-stable-21_rtx5090.txt")
    assert gpu_models(facts) == [("NVIDIA GeForce RTX 5090", "12.0")]
    assert facts.driver.cuda_version is None  # "CUDA (torch): 13.0" is the build's


def test_a_vgpu_type_named_with_its_driver_in_a_bullet_is_the_board() -> None:
    facts = read_capture("form_prose_bullets_vgpu_driver__comfyui-6843_a16-8a-528.24.txt")
    assert gpu_models(facts) == [("NVidia A16-8A", "8.6")]
    assert facts.driver.version == "528.24"


def test_jetson_inference_banner_gives_the_l4t_release() -> None:
    facts = read_capture("docker_run_l4t_bsp_line__ros-deep-learning-129_orin-nx-35.4.1.txt")
    assert facts.system.l4t_release == "35.4.1"
    assert facts.gpus == []


def test_recomputer_names_the_board_and_its_release() -> None:
    name = "recomputer_machine_l4t_docker_info__seeed-jetson-examples-35_orin-nano-super-36.4.4.txt"
    facts = read_capture(name)
    model = "nvidia jetson orin nano engineering reference developer kit super"
    assert gpu_models(facts) == [(model, "8.7")]
    assert facts.system.l4t_release == "36.4.4"
    assert facts.containers.docker is not None  # the docker info below is still read


def test_an_invokeai_model_answer_no_model_fits_is_a_gpu_of_unknown_capability() -> None:
    facts = read_capture("invoke_form_gpu_model_short__invokeai-7936_rtx2000.txt")
    assert gpu_models(facts) == [("RTX2000", None)]


def test_a_card_report_names_the_gpu_and_its_device_id() -> None:
    facts = read_capture("gpuz_style_card_list__invokeai-7839_gtx-titan-x.txt")
    assert gpu_models(facts) == [("NVIDIA GeForce GTX TITAN X", "5.2")]
    assert [g.pci_device_id for g in facts.gpus] == ["10de:17c2"]


def test_the_open_kmod_form_version_with_a_fork_suffix_is_the_driver() -> None:
    facts = read_capture("form_open_kmod_p2p_hw__tinygrad-ogkm-29_rtx5090-565.57.01.txt")
    assert facts.driver.version == "565.57.01"
    assert facts.driver.kernel_module_version is None  # a form's answer, not a loaded module
    assert gpu_models(facts) == [("RTX 5090", "12.0")]


def test_a_fix_guides_expected_output_is_not_the_writers_machine() -> None:
    facts = read_capture("fix_guide_torch_probe_expected__sd-webui-forge-2746_rtx5090.txt")
    assert facts.gpus == []


def test_the_form_answer_stays_where_the_torch_device_is_wrapped() -> None:
    """The log's device (joined across the wrap) counts only where nothing else names a GPU; the
    form's own answer names the same GPU in other words."""
    text = (
        CAPTURES / "invoke_form_sysinfo_wrapped_device__invokeai-8554_gtx1060-maxq.txt"
    ).read_text()
    assert gpu_models(gpus.enrich(invokeai.parse_invokeai(text))) == [
        ("NVIDIA GeForce GTX 1060 with Max-Q Design", "6.1")
    ]
    assert gpu_models(read_paste(text)) == [("GTX 1060 Max-Q", "6.1")]


def test_a_gpu_named_with_its_driver_in_a_bullet_list() -> None:
    facts = read_capture("prose_bullets__krig-miner-5_rtx5090-610.74.txt")
    assert gpu_models(facts) == [("RTX 5090", "12.0")]


# --- one-line reports -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        "| GPU | NVIDIA GeForce RTX 4090 |",  # a markdown table row
        "GPU: NVIDIA GeForce RTX 4090 or better | VRAM: 24GB",  # a requirement
        "GPU: RTX 4090 | VRAM: 24GB",  # typed by a person, not torch's name
        "Recommended GPU: NVIDIA GeForce RTX 3080 | VRAM: 10GB",
        "GPU: NVIDIA GeForce RTX 4090 | see the log below",  # a part that is no field
        "GPU: NVIDIA GeForce RTX 4090",  # one field: an environment list's line
    ],
)
def test_lines_that_are_no_one_line_report_name_no_gpu(line: str) -> None:
    assert pipe_report.parse_pipe_report(line + "\n").gpus == []


def test_a_capability_given_as_a_version_is_read() -> None:
    line = "Detected GPU: NVIDIA GeForce RTX 2070 | VRAM: 8.00GB | Compute Capability: 7.5\n"
    assert gpu_models(pipe_report.parse_pipe_report(line)) == [("NVIDIA GeForce RTX 2070", "7.5")]


# --- InvokeAI -----------------------------------------------------------------------------------

_STAMP = "[2025-09-10 11:38:19,917]::[InvokeAI]::INFO --> "


@pytest.mark.parametrize(
    "device",
    ["CPU", "mps", "AMD Radeon RX 7900 XTX", "cuda"],
)
def test_a_torch_device_of_no_nvidia_gpu_is_not_read(device: str) -> None:
    assert invokeai.parse_invokeai(f"{_STAMP}Using torch device: {device}\n").gpus == []


def test_a_record_followed_by_other_lines_is_not_joined_without_a_width() -> None:
    """One cut line is no width: the line after the device is a warning, not its name's end."""
    text = (
        f"{_STAMP}Using torch device: NVIDIA GeForce RTX 4090\n"
        "C:\\venv\\Lib\\site-packages\\torch\\cuda\\__init__.py:61: FutureWarning\n"
        f"{_STAMP}InvokeAI version 6.6.0\n"
    )
    assert gpu_models(invokeai.parse_invokeai(text)) == [("NVIDIA GeForce RTX 4090", None)]


def test_a_record_shorter_than_the_longest_is_not_joined() -> None:
    cut = f"{_STAMP}Using torch device: NVIDIA GeForce RTX 4090"
    width = len(cut)
    other = f"{_STAMP}Root directory = C:\\InvokeAI".ljust(width, "x")
    longer = f"{_STAMP}Initializing database at C:\\InvokeAI\\databases\\invokeai.db and more"
    assert len(longer) > width
    text = "\n".join([cut, "warning line", other, "x", longer, "y", ""])
    assert gpu_models(invokeai.parse_invokeai(text)) == [("NVIDIA GeForce RTX 4090", None)]


def _form(vendor: str, model: str) -> str:
    return f"### GPU vendor\n\n{vendor}\n\n### GPU model\n\n{model}\n\n### GPU VRAM\n\n12GB\n"


@pytest.mark.parametrize(
    ("vendor", "model"),
    [
        ("AMD (ROCm)", "8060s gfx1151"),  # invoke-ai/InvokeAI#8655
        ("Nvidia (CUDA)", "_No response_"),
        ("Nvidia (CUDA)", "Nvidia"),
        ("Nvidia (CUDA)", "not sure"),
        ("Nvidia (CUDA)", "RTX 3060 or 3070"),
        ("Nvidia (CUDA)", "2x RTX 3090"),
        ("Nvidia (CUDA)", "RTX 4090 (24GB), on a laptop"),
        ("None (CPU)", "RTX2000"),
    ],
)
def test_form_answers_that_name_no_one_gpu_are_not_read(vendor: str, model: str) -> None:
    assert invokeai.parse_invokeai(_form(vendor, model)).gpus == []


def test_a_catalogued_form_answer_is_the_environment_lists() -> None:
    """Where the catalogue knows the answer the form's heading reader has it; InvokeAI's reading
    is the fallback and adds no second GPU."""
    facts = read_paste(_form("Nvidia (CUDA)", "RTX 3060"))
    assert gpu_models(facts) == [("RTX 3060", "8.6")]


# --- card report --------------------------------------------------------------------------------


def test_another_vendors_card_in_the_report_is_not_read() -> None:
    intel = (
        "Intel UHD Graphics 630\nManufacturer Intel\nModel UHD Graphics 630\n"
        "Device ID 8086-3E92\nRevision 3\n"
    )
    assert card_report.parse_card_report(intel).gpus == []


def test_a_report_whose_device_id_is_not_nvidias_is_not_read() -> None:
    text = "Manufacturer NVIDIA\nModel GeForce GTX 1080\nDevice ID 1002-67DF\n"
    assert card_report.parse_card_report(text).gpus == []


def test_a_heading_that_is_not_the_models_name_gives_way_to_the_model() -> None:
    text = "Graphics\nManufacturer NVIDIA\nModel GeForce GTX 1080\nDevice ID 10DE-1B80\n"
    assert gpu_models(card_report.parse_card_report(text)) == [("GeForce GTX 1080", None)]


# --- Jetson helper scripts --------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        # A script that fixes the release it prints, not the board's.
        "ARCH:  aarch64\nL4T BSP Version:  L4T R35.1.0\n",
        # The dpkg branch's release of two parts.
        'reading L4T version from "dpkg-query --show nvidia-l4t-core"\n'
        "L4T BSP Version:  L4T R36.4\n",
        # The banner alone, as a guide quotes it.
        "L4T BSP Version:  L4T R36.5.2\nCONTAINER_IMAGE:  dustynv/jetson-inference:r36.5.2\n",
    ],
)
def test_a_banner_not_read_from_the_boards_file_is_not_read(text: str) -> None:
    assert jetson_scripts.parse_l4t_banner(text).system.l4t_release is None


@pytest.mark.parametrize(
    "line",
    [
        "WARNING: machine[raspberry pi 4 model b rev 1.4] maybe not support...",
        "INFO: machine[seeed recomputer j4012 orin nx] confirmed...",  # no Jetson named
        "# INFO: Machine [Jetson AGX Orin] confirmed...",  # a guide's comment
    ],
)
def test_a_machine_line_naming_no_jetson_is_not_read(line: str) -> None:
    assert jetson_scripts.parse_recomputer(line + "\n").gpus == []


def test_a_tools_gpu_list_wins_over_recomputers_board() -> None:
    """Two real pastes as one: nvidia-smi's "Orin (nvgpu)" is the board's GPU, named once."""
    text = "\n".join(
        (CAPTURES / name).read_text()
        for name in (
            "recomputer_machine_l4t_docker_info__seeed-jetson-examples-35_orin-nano-super-36.4.4.txt",
            "nvsmi_L_table_orin_nvgpu__jetpack-nixos-pr371_orin-540.4.0.txt",
        )
    )
    assert [g.name for g in read_paste(text).gpus] == ["Orin (nvgpu)"]


# --- open-gpu-kernel-modules form -------------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    ["565", "580-open, 570-open, 575-open", "_No response_", "550.54.14, 550.67", "latest main"],
)
def test_an_answer_that_is_not_one_version_is_not_read(answer: str) -> None:
    text = f"### NVIDIA Open GPU Kernel Modules Version\n\n{answer}\n\n### Kernel Release\n\nNA\n"
    assert open_kmod_form.parse_open_kmod_form(text).driver.version is None


def test_a_package_revision_after_the_version_is_left_out() -> None:
    text = "### NVIDIA Open GPU Kernel Modules Version\n\n550.54.15-1\n"
    assert open_kmod_form.parse_open_kmod_form(text).driver.version == "550.54.15"


# --- a GPU and its driver in a list item --------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "- RTX 4090 or better, driver 550.54.14\n",  # a requirement
        "- RTX 3090, needs driver 535.104.05\n",
        "- NVIDIA RTX 3090, CUDA 12.2\n",  # no driver with it
        "- Tested on RTX 3090, driver 535.104.05\n",  # the item does not open with the name
        "- NVIDIA driver 535.104.05, CUDA 12.2\n",  # a driver, no GPU
        "- RTX 3090, driver 535.104.05\n- RTX 4090, driver 550.54.14\n",  # two machines
        "- Windows 11, driver version 528.24\n",
        "- RX 7900 XTX, driver 24.3.1\n",
    ],
)
def test_items_that_name_no_one_gpu_with_its_driver_are_not_read(text: str) -> None:
    assert gpu_driver_item.parse_gpu_driver_item(text).gpus == []


def test_a_tools_gpu_list_wins_over_the_item() -> None:
    """Two real pastes as one: the nvidia-smi table's GPUs are the list."""
    text = "\n".join(
        (CAPTURES / name).read_text()
        for name in (
            "form_prose_bullets_vgpu_driver__comfyui-6843_a16-8a-528.24.txt",
            "nvsmi_L_table__akash-provider-configs-pr12_2x-quadro-rtx4000.txt",
        )
    )
    assert [g.name for g in read_paste(text).gpus] == [
        g.name
        for g in read_capture(
            "nvsmi_L_table__akash-provider-configs-pr12_2x-quadro-rtx4000.txt"
        ).gpus
    ]


# --- vGPU types in the catalogue --------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "model", "cc"),
    [
        ("NVidia A16-8A", "A16", "8.6"),
        ("NVIDIA A16-4Q", "A16", "8.6"),
        ("GRID T4-16Q", "T4", "7.5"),
        ("NVIDIA L40S-48Q", "L40S", "8.9"),
        ("GRID M60-8Q", "Tesla M60 / M40 / M6 / M4", "5.2"),
        ("GRID M10-8Q", "Tesla M10", "5.0"),
        ("Tesla M40 24GB", "Tesla M60 / M40 / M6 / M4", "5.2"),
        # the desktop Quadro, not a Tesla M60 by its "M60" prefix
        ("Quadro M6000", "Quadro Maxwell (M2000 / M4000 / M5000 / M6000)", "5.2"),
    ],
)
def test_a_vgpu_type_is_its_boards_model(name: str, model: str, cc: str) -> None:
    found = gpus.lookup(name)
    assert found is not None and (found.name, found.compute_capability) == (model, cc)


@pytest.mark.parametrize(
    "name",
    ["Apple M4", "M60", "RX580-8G", "GRID RTX6000-24Q", "H100XM", "RTX2000"],
)
def test_names_that_are_no_known_board_stay_unknown(name: str) -> None:
    assert gpus.lookup(name) is None
