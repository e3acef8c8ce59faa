"""The shapes capture set 12 read: a GPU one output names twice, mobile Maxwell GeForces and V100
vGPU types in the GPU catalogue, detectron2's and Paddle's environment reports, Paddle's device
note, Ryujinx's GPU line and CTranslate2's device log; and the near misses beside them that must
stay unread."""

from __future__ import annotations

import pytest

from checks.facts import capture, gpus
from checks.facts.model import Gpu, HostFacts, merge
from checks.facts.parsers import collect_env, ctranslate2, paddle, vulkan
from tests.support.captures import capture_text, gpu_names, read_capture

# --- one GPU named twice in one output ------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "gpu", "mib"),
    [
        # the error report's Devices list, then two start-ups in its Logs
        (
            "comfyui_report_devices_logs__mochiwrapper-87_rtx3070.txt",
            "NVIDIA GeForce RTX 3070",
            8192,
        ),
        # the Devices list, then one start-up in its Logs
        (
            "comfyui_report_devices_log__comfyui-5278_rtx2060-12gb.txt",
            "NVIDIA GeForce RTX 2060",
            12288,
        ),
    ],
)
def test_a_device_named_again_under_its_index_is_one_gpu(name: str, gpu: str, mib: int) -> None:
    facts = read_capture(name)
    assert gpu_names(facts) == [gpu]
    assert facts.gpus[0].index == 0 and facts.gpus[0].memory_total_mib == mib


def test_a_start_up_log_pasted_twice_is_one_gpu() -> None:
    start = (
        "Total VRAM 24564 MB, total RAM 32694 MB\nDevice: cuda:0 NVIDIA GeForce RTX 4090 : native\n"
    )
    facts, _ = capture.recognise(start + "\n" + start)
    assert gpu_names(facts) == ["NVIDIA GeForce RTX 4090"]


def _one_output(*found: Gpu) -> list[Gpu]:
    return merge(HostFacts(), HostFacts(gpus=list(found))).gpus


def test_repeats_of_an_output_fold_by_bus_id_uuid_or_index_and_name() -> None:
    assert len(_one_output(Gpu(index=0, name="A"), Gpu(index=0, name="A"))) == 1
    assert len(_one_output(Gpu(pci_bus_id="0000:01:00.0"), Gpu(pci_bus_id="01:00.0"))) == 1
    assert len(_one_output(Gpu(uuid="GPU-1", index=0), Gpu(uuid="GPU-1"))) == 1
    folded = _one_output(Gpu(index=0, name="A"), Gpu(index=0, name="A", memory_total_mib=8))
    assert folded == [Gpu(index=0, name="A", memory_total_mib=8)]


def test_what_may_be_two_gpus_stays_two() -> None:
    # the same index under two names (two processes, each with its own cuda:0)
    assert len(_one_output(Gpu(index=0, name="A"), Gpu(index=0, name="B"))) == 2
    # the same index on two buses (two hosts)
    two_buses = _one_output(Gpu(index=0, pci_bus_id="01:00.0"), Gpu(index=0, pci_bus_id="41:00.0"))
    assert len(two_buses) == 2
    # "2x Tesla P40": no index, no bus: two cards of one model
    assert len(_one_output(Gpu(name="Tesla P40"), Gpu(name="Tesla P40"))) == 2


# --- the GPU catalogue ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "capability"),
    [
        ("GeForce GTX 965M", "5.2"),
        ("NVIDIA GeForce GTX 980M", "5.2"),
        ("GeForce GTX 970M", "5.2"),
        ("GeForce GTX 960M", "5.0"),
        ("GeForce GTX 950M", "5.0"),
        ("NVIDIA GeForce GTX 850M", "5.0"),
        ("GeForce 940M", "5.0"),
        ("GeForce 940MX", "5.0"),  # 5.0 on both its chips (tensorflow/tensorflow#46449, #42052)
        ("GeForce GTX 960", "5.2"),  # the desktop part
        ("GRID V100D-8C", "7.0"),
        ("GRID V100DX-32Q", "7.0"),
        ("GRID V100-16Q", "7.0"),
        ("GRID V100X-2B4", "7.0"),
        ("GRID V100L-4C", "7.0"),
    ],
)
def test_the_catalogue_knows_mobile_maxwell_and_v100_vgpu_types(name: str, capability: str) -> None:
    model = gpus.lookup(name)
    assert model is not None and model.compute_capability == capability


@pytest.mark.parametrize("name", ["GeForce GTX 860M", "GeForce 920M", "GRID A100D-80C"])
def test_parts_the_catalogue_cannot_tell_stay_unknown(name: str) -> None:
    assert gpus.lookup(name) is None


def test_a_vgpu_type_carries_no_board_memory() -> None:
    model = gpus.lookup("GRID V100D-8C")
    assert model is not None and model.memory_gib is None
    board = gpus.lookup("Tesla V100-PCIE-32GB")
    assert board is not None and board.memory_gib == 32


@pytest.mark.parametrize(
    ("name", "capability"),
    [
        ("mmdet_collectenv_debugged__mmdet-2960_gtx965m.txt", "5.2"),
        ("nvsmi_a_vgpu_grid__k8sdp-250_v100d-8c-450.102.04.txt", "7.0"),
    ],
)
def test_captures_of_those_gpus_get_their_capability(name: str, capability: str) -> None:
    assert [gpu.compute_capability for gpu in read_capture(name).gpus] == [capability]


# --- detectron2's collect_env ---------------------------------------------------------------------


def test_detectron2s_table_gives_the_gpu_and_its_arch() -> None:
    facts = collect_env.parse_detectron2_env(
        capture_text("detectron2_collectenv_table__d2-2913_gtx1650ti-maxq.txt")
    )
    assert gpu_names(facts) == ["GeForce GTX 1650 Ti with Max-Q Design"]
    assert facts.gpus[0].compute_capability == "7.5" and facts.gpus[0].index == 0
    assert facts.driver.version is None  # "CUDA compiler CUDA 10.1" is a toolkit


def test_detectron2s_table_gives_the_driver_row_where_it_has_one() -> None:
    facts = collect_env.parse_detectron2_env(
        capture_text("detectron2_collectenv_table_driver__d2-4928_a100-515.65.01.txt")
    )
    assert facts.driver.version == "515.65.01"
    assert [(g.name, g.compute_capability) for g in facts.gpus] == [
        ("NVIDIA A100-PCIE-40GB", "8.0")
    ]


def test_one_detectron2_row_of_many_devices_is_one_gpu_each() -> None:
    facts = read_capture("detectron2_collectenv_16x_k80__d2-722_16x-k80.txt")
    assert [g.index for g in facts.gpus] == list(range(16))
    assert set(gpu_names(facts)) == {"Tesla K80"}
    assert {g.compute_capability for g in facts.gpus} == {"3.7"}  # from the catalogue


D2_AVAILABLE = "GPU available           True\n"


@pytest.mark.parametrize(
    "text",
    [
        # no GPU
        "GPU available           False\nPillow                  8.1.0\n",
        # another vendor's GPU (ROCm)
        D2_AVAILABLE + "GPU 0                   AMD Instinct MI210 (arch=9.0)\n",
        # a GPU row without the table's "available" row
        "GPU 0                   GeForce GTX 1080 (arch=6.1)\n",
        # mmcv's "Key: value" lines and nvidia-smi -L are not the table
        "CUDA available: True\nGPU 0: GeForce GTX 1080\n",
        D2_AVAILABLE + "GPU 0: NVIDIA GeForce RTX 3090 (UUID: GPU-5d1c)\n",
        # a driver row alone
        D2_AVAILABLE + "Driver version          535.54.03\n",
    ],
)
def test_other_tables_and_rows_stay_unread(text: str) -> None:
    facts = collect_env.parse_detectron2_env(text)
    assert not facts.gpus and facts.driver.version is None


# --- Paddle's summary_env -------------------------------------------------------------------------


def test_paddles_summary_env_gives_the_driver_and_its_gpu_list() -> None:
    text = capture_text("paddle_envinfo_driver_list__paddle-52100_8x-p40-440.33.01.txt")
    assert collect_env.detect_collect_env(text)
    facts = collect_env.parse_collect_env(text)
    assert facts.driver.version == "440.33.01"
    assert facts.driver.cuda_version is None  # "CUDA version: 11.2.142" is nvcc's
    assert [(g.index, g.name) for g in facts.gpus] == [(i, "Tesla P40") for i in range(8)]


def test_a_gpu_list_without_paddles_driver_line_is_not_its_report() -> None:
    assert not collect_env.detect_collect_env("Nvidia driver List:\nGPU 0: Tesla P40\n")


def test_paddles_unknown_driver_stays_unknown() -> None:
    text = "Nvidia driver version: N/A\nNvidia driver List: N/A\n"
    facts = collect_env.parse_collect_env(text)
    assert facts.driver.version is None and not facts.gpus


# --- Paddle's device note -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "cuda", "capability"),
    [
        ("paddle_device_context_windows__paddle-17863_rtx2060.txt", "10.1", "7.5"),
        ("paddle_device_note_old__paddle-23487_windows.txt", "10.1", "6.1"),
        ("paddle_device_note_run_check__paddle-39090_rtx3090.txt", "11.4", "8.6"),
    ],
)
def test_paddles_note_gives_the_drivers_cuda_and_the_capability(
    name: str, cuda: str, capability: str
) -> None:
    facts = paddle.parse_device_note(capture_text(name))
    assert facts.driver.cuda_version == cuda
    assert [(g.index, g.name, g.compute_capability) for g in facts.gpus] == [(0, None, capability)]


@pytest.mark.parametrize(
    "text",
    [
        # the cuDNN line alone
        "W0404 16:40:48.373013 14840 device_context.cc:245] device: 0, cuDNN Version: 7.6.\n",
        # another accelerator's note
        "W0601 10:00:00.000000 1 mlu_info.cc:1] Please NOTE: device: 0,"
        " MLU Compute Capability: 3.0, Driver API Version: 4.20.18, Runtime API Version: 5.10.22\n",
        # a driver version that is no CUDA release (HIP's, on ROCm)
        "Please NOTE: device: 0, GPU Compute Capability: 9.0, Driver API Version: 3.5,"
        " Runtime API Version: 3.5\n",
        "Please NOTE: device: 0, GPU Compute Capability: 9.0, Driver API Version: 50221.5,"
        " Runtime API Version: 50221.5\n",
    ],
)
def test_other_notes_give_nothing(text: str) -> None:
    facts = paddle.parse_device_note(text)
    assert not facts.gpus and facts.driver.cuda_version is None


# --- Ryujinx --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "gpu", "driver"),
    [
        (
            "ryujinx_log_gpuinfo_vulkan__ryujinx-3821_gtx1650-526.47.txt",
            "NVIDIA GeForce GTX 1650",
            "526.47",
        ),
        (
            "ryujinx_log_gpuinfo_vulkan__ryujinx-7348_rtx4060ti-560.70.txt",
            "NVIDIA GeForce RTX 4060 Ti",
            "560.70",
        ),
    ],
)
def test_ryujinxs_gpu_line_gives_the_gpu_and_the_driver(name: str, gpu: str, driver: str) -> None:
    facts = vulkan.parse_ryujinx(capture_text(name))
    assert gpu_names(facts) == [gpu] and facts.driver.version == driver


LINE = "00:00:02.216 |N| GUI.RenderThread Gpu PrintGpuInformation: "


@pytest.mark.parametrize(
    ("packed", "driver"),
    [
        ("535.104.5.0", "535.104.05"),  # Linux: the third part has two digits
        ("532.4.0.0", "532.04"),  # Windows: so has the second
    ],
)
def test_ryujinxs_driver_is_decoded_as_nvidia_writes_it(packed: str, driver: str) -> None:
    text = LINE + f"NVIDIA NVIDIA GeForce RTX 3060 (Vulkan v1.3.260, Driver v{packed})\n"
    assert vulkan.parse_ryujinx(text).driver.version == driver


@pytest.mark.parametrize(
    "text",
    [
        LINE + "AMD AMD Radeon RX 6800 XT (Vulkan v1.3.260, Driver v2.0.279)\n",
        LINE + "Intel Intel(R) UHD Graphics 620 (Vulkan v1.3.215, Driver v0.404.1960)\n",
        # a Jetson's integrated GPU: its version is L4T's
        LINE + "NVIDIA NVIDIA Tegra X1 (nvgpu) (Vulkan v1.2.70, Driver v32.7.1.0)\n",
        # the OpenGL backend's line
        LINE + "NVIDIA Corporation NVIDIA GeForce GTX 1650/PCIe/SSE2 (4.6.0 NVIDIA 526.47)\n",
    ],
)
def test_other_gpu_lines_stay_unread(text: str) -> None:
    facts = vulkan.parse_ryujinx(text)
    assert not facts.gpus and facts.driver.version is None


def test_vulkaninfo_writes_a_one_digit_minor_as_two() -> None:
    text = "vendorID = 0x10de\ndeviceName = NVIDIA GeForce RTX 4090\ndriverVersion = 566.3.0.0\n"
    assert vulkan.parse_vulkaninfo(text).driver.version == "566.03"


# --- CTranslate2 ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "ctranslate2_log_quoted__fwxxl-459_rtx5060ti.txt",
        "ctranslate2_log_compose__ct2-1981_rtx5060ti.txt",
    ],
)
def test_ctranslate2s_device_line_gives_the_gpu_and_its_capability(name: str) -> None:
    facts = ctranslate2.parse_ctranslate2(capture_text(name))
    assert [(g.index, g.name, g.compute_capability) for g in facts.gpus] == [
        (0, "NVIDIA GeForce RTX 5060 Ti", "12.0")
    ]


CT2 = "[2025-04-30 09:09:39.177] [ctranslate2] [thread 6904] [info] "


@pytest.mark.parametrize(
    "text",
    [
        CT2 + "GPU #0: AMD Radeon RX 7900 XTX (CC=11.0)\n",  # a ROCm build
        CT2 + " - Allow INT8: true\n",
        CT2 + "CPU: GenuineIntel (SSE4.1=true, AVX=true, AVX2=true, AVX512=false)\n",
        "GPU #0: NVIDIA GeForce RTX 3090 (CC=8.6)\n",  # not CTranslate2's log
    ],
)
def test_other_ctranslate2_lines_stay_unread(text: str) -> None:
    assert not ctranslate2.parse_ctranslate2(text).gpus


# --- robustness -----------------------------------------------------------------------------------


def test_every_new_reader_survives_garbage() -> None:
    junk = [
        "",
        "GPU 0" + " " * 10_000 + "x",
        "GPU available  True\n" + "GPU 0  " + "(" * 5_000 + "\n",
        "Please NOTE: device: 0, " * 2_000,
        "PrintGpuInformation: NVIDIA NVIDIA " + "A" * 10_000,
        "[ctranslate2] [thread 1] [info] GPU #0: " + "N" * 10_000,
        "Nvidia driver version: 1\nNvidia driver List:\n" + "GPU 0: x\n" * 1_000,
    ]
    for text in junk:
        for parse in (
            collect_env.parse_detectron2_env,
            collect_env.parse_collect_env,
            paddle.parse_device_note,
            vulkan.parse_ryujinx,
            ctranslate2.parse_ctranslate2,
        ):
            assert isinstance(parse(text), HostFacts)
