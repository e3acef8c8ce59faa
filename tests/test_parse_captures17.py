"""The shapes capture set 17 read: a GPU named by a warning and again in a counted list is one
GPU of that list, hand-numbered environment lists ("2. Driver: 540.4.0", "3. CUDA DRIVER: 12.6"),
jetson-stats' board reports (the module's integrated GPU), an issue form's question about the GPU,
PyTorch's capability warning retyped, and the compute capability of a name nvidia-smi cut inside
its model number; and the near misses that must stay unread."""

from __future__ import annotations

import pytest

from checks.facts import capture, gpus
from checks.facts.model import Gpu, HostFacts, merge
from checks.facts.parsers import collect_env, env_list, jetson, nvidia_smi
from tests.conftest import PROBE_CASES, load_case
from tests.support.captures import gpu_models, read_capture, read_paste


def _merged(*outputs: list[Gpu]) -> list[Gpu]:
    facts = HostFacts()
    for found in outputs:
        merge(facts, HostFacts(gpus=found))
    return facts.gpus


# --- one GPU named by a warning and by a counted list -------------------------------------------


def test_a_warnings_gpu_is_one_of_the_lists_two() -> None:
    # pytorch/pytorch#167244: the sm_120 warning names 'NVIDIA GeForce RTX 5090', the bullets
    # '- GPU: 2\u00d7 RTX 5090 (32 GB each)'.
    facts = read_capture(
        "torch_sm120_warning_env_bullets__pytorch-167244_2x-rtx5090-570.124.06.txt"
    )
    assert gpu_models(facts) == [("NVIDIA GeForce RTX 5090", "12.0")] * 2


def test_name_only_gpus_fold_whichever_output_comes_first() -> None:
    def warned() -> list[Gpu]:
        return [Gpu(name="NVIDIA GeForce RTX 5090", compute_capability="12.0")]

    def listed(count: int = 2, name: str = "RTX 5090") -> list[Gpu]:
        return [Gpu(name=name) for _ in range(count)]

    assert [g.name for g in _merged(warned(), listed())] == ["NVIDIA GeForce RTX 5090"] * 2
    assert [g.name for g in _merged(listed(), warned())] == ["RTX 5090"] * 2  # the first spelling
    assert len(_merged(listed(), listed(3, "rtx 5090"))) == 3  # the larger count stands


def test_name_only_gpus_of_other_models_stay_apart() -> None:
    assert len(_merged([Gpu(name="RTX 5090")], [Gpu(name="NVIDIA GeForce RTX 5090 D")])) == 2
    assert len(_merged([Gpu(name="Tesla P40")], [Gpu(name="Tesla P4")])) == 2
    # one output's "2x Tesla P40" is two GPUs, as before
    assert len(merge(HostFacts(), HostFacts(gpus=[Gpu(name="Tesla P40")] * 2)).gpus) == 2


# FlyMyAI/flymyai-lora-trainer#47 (description by iEddie-cmd, 2025-10-25): the warning pasted
# without its first letter; its last sentence names the same GPU in full.
_WARNING_CUT = (
    "VIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current"
    " PyTorch installation.\n"
    "The current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_70 sm_75 sm_80 sm_86"
    " sm_90.\n"
    "If you want to use the NVIDIA GeForce RTX 5090 GPU with PyTorch, please check the"
    " instructions at https://pytorch.org/get-started/locally/\n"
)


def test_the_warnings_two_sentences_about_one_gpu_are_one_gpu() -> None:
    assert gpu_models(read_paste(_WARNING_CUT)) == [("VIDIA GeForce RTX 5090", "12.0")]


# --- PyTorch's capability warning, retyped ------------------------------------------------------

# sp-uhh/sgmse#17 (description by zhourui-xihu, 2022-12-08; cut after the warning): the terminal
# wrapped the lines inside words.
_WARNING_WRAPPED = (
    "UserWarning:\n"
    "NVIDIA A100-SXM4-80GB with CUDA capability sm_80 is not compatible with the curr     ent"
    " PyTorch installation.\n"
    "The current PyTorch install supports CUDA capabilities sm_37 sm_50 sm_60 sm_70.\n"
    "If you want to use the NVIDIA A100-SXM4-80GB GPU with PyTorch, please check the     "
    " instructions at https://pytorch.org/get-started/locally/\n"
)
# pBFSLab/DeepPrep#233 (description by lxa27, 2025-06-30): the warning indented, then prose.
_WARNING_INDENTED = (
    "  NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current"
    " PyTorch installation.\n"
    "  The current PyTorch install supports CUDA capabilities sm_37 sm_50 sm_60 sm_70 sm_75 sm_80"
    " sm_86 sm_90.\n"
    "the version torch is 2.0.1\n"
    "cuda is 11.8\n"
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (_WARNING_WRAPPED, [("NVIDIA A100-SXM4-80GB", "8.0")]),
        (_WARNING_INDENTED, [("NVIDIA GeForce RTX 5090", "12.0")]),
    ],
)
def test_a_retyped_or_wrapped_warning_names_its_gpu(
    text: str, expected: list[tuple[str, str]]
) -> None:
    assert gpu_models(read_paste(text)) == expected


def test_the_warning_in_lower_case_names_its_gpu() -> None:
    # HaoKang-Timmy/LatencySensitiveBench#19: "nvidia geforce rtx 5090 with cuda capabilities
    # sm_120 is not compatible"
    facts = read_capture("torch_sm120_warning_retyped_lower__latencybench-19_rtx5090.txt")
    assert gpu_models(facts) == [("nvidia geforce rtx 5090", "12.0")]


@pytest.mark.parametrize(
    "text",
    [
        # ml-struct-bio/cryodrgn#91 (comment by zhonge, 2021-11-26): the words in a page's address
        "It looks like it is an incompatibility between your pytorch and CUDA versions. How did you"
        " install pytorch? I would try searching the pytorch discussion pages to see if there's"
        " anything helpful there, e.g. https://discuss.pytorch.org/t/geforce-rtx-3090-with-cuda-"
        "capability-sm-86-is-not-compatible-with-the-current-pytorch-installation/123499/9/\n",
        # Hellod035/LeggedLab#26 (title by hhz0328, 2025-06-06): a series, not a GPU's name
        "CUDA error\uff1aRTX 50xx\u2018s sm_120 is not compatible with the current PyTorch"
        " installation\n",
    ],
)
def test_the_warnings_words_without_a_gpus_name_name_no_gpu(text: str) -> None:
    assert collect_env.parse_collect_env(text).gpus == []
    assert not collect_env.detect_collect_env(text)


# --- hand-numbered environment lists ------------------------------------------------------------


def test_a_numbered_list_gives_the_driver_and_the_cuda_drivers_version() -> None:
    # XuehaiPan/nvitop#168: "2. Driver: 540.4.0", "3. CUDA DRIVER: 12.6", and "Seems nvitop could
    # not well detect jetson orin nano platform." in the prose above
    facts = read_capture("prose_numbered_env_jetson__nvitop-168_orin-nano-540.4.0.txt")
    assert (facts.driver.version, facts.driver.cuda_version) == ("540.4.0", "12.6")
    assert gpu_models(facts) == [("jetson orin nano", "8.7")]


# Bibek199/VoxelNext_Projektarbeit, README.md (cut): the authors' machine as a numbered list, some
# items left empty.
_NUMBERED_PC = (
    "Description of our PC hardware and software features:\n\n"
    "1. Operating System: Linux Ubuntu 22.04.4 LTS \n"
    "2. GPU: Nvidia Geforce RTX3050 4GB \n"
    "3. GPU Driver version: 550.67 \t\n"
    "4. CUDA Version:\n"
    "5. CUDA Toolkit version:  \n"
    "5. Python version: 3.11.8\n"
    "6. Pytorch version:   \n"
    "7. Anaconda version : 24.1.2\n"
)
# radixon/GPU_Optimization, SystemCheck/ReadMe.md: a numbered list with a lone GPU line.
_NUMBERED_SYSTEM = (
    "## My System\n"
    "1. OS:  Windows 11 [Run programs with WSL - Ubuntu]\n"
    "2. GPU: NVIDIA GeForce RTX 3080\n"
    "3. IDE: VS Code\n"
)


def test_numbered_items_read_like_bullets() -> None:
    pc = read_paste(_NUMBERED_PC)
    assert (pc.driver.version, pc.driver.cuda_version) == ("550.67", None)
    assert gpu_models(pc) == [("Nvidia Geforce RTX3050 4GB", "8.6")]
    assert gpu_models(read_paste(_NUMBERED_SYSTEM)) == [("NVIDIA GeForce RTX 3080", "8.6")]


# Emerge-Lab/gpudrive#520 (description by RTGTX7, 2025-09-16; cut): numbered questions that ask
# for the versions without giving any.
_NUMBERED_QUESTIONS = (
    "### Questions\n\n"
    "1. **CUDA toolkit version**  \n"
    "   The documentation states GPUDrive supports CUDA 12.2 \u2013 12.4.  \n"
    "   However, NVIDIA\u2019s official docs say `sm_120` (Blackwell) is only supported starting"
    " with CUDA 12.8.  \n"
    "   - Has GPUDrive ever been tested on `sm_120` GPUs with CUDA 12.4?  \n"
    "   - Is the crash expected because CUDA 12.4 doesn\u2019t fully support this architecture?\n\n"
    "2. **Real-world usage**  \n"
    "   Has anyone (dev team or community) successfully run GPUDrive on RTX 50 series GPUs (e.g.,"
    " 5070 Ti, 5080)? If yes, could you please share:\n"
    "   - CUDA version  \n"
    "   - Driver version  \n"
    "   - Any special build flags (e.g., `CMAKE_CUDA_ARCHITECTURES`, PTX fallback)?\n"
)


def test_numbered_questions_state_nothing() -> None:
    facts = env_list.parse_env_list(_NUMBERED_QUESTIONS)
    assert (facts.gpus, facts.driver.version, facts.driver.cuda_version) == ([], None, None)
    with pytest.raises(capture.CaptureError):
        read_paste(_NUMBERED_QUESTIONS)


# --- jetson-stats' board: the module's integrated GPU -------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        # "Module: NVIDIA Jetson Orin Nano (Developer kit)", "CUDA Arch BIN: 8.7"
        (
            "jtop_board_form__jetson-stats-405_orin-nano-35.3.1.txt",
            [("NVIDIA Jetson Orin Nano (Developer kit)", "8.7")],
        ),
        (
            "jtop_board_form_raw__jetson-stats-677_agx-orin-36.4.4.txt",
            [("NVIDIA Jetson AGX Orin", "8.7")],
        ),
        # "Module: **MISSING**": the board's model names the Jetson
        (
            "jtop_hw_missing__jetson-stats-476_agx-orin-36.2.0.txt",
            [("NVIDIA Jetson AGX Orin Developer Kit", "8.7")],
        ),
        # jetson_release: no "CUDA Arch BIN", the catalogue's capability
        (
            "jetson_release_missing__jetson-stats-603_orin-nx-36.4.3.txt",
            [("NVIDIA Jetson Orin NX (8GB ram)", "8.7")],
        ),
        (
            "jetson_release_custom_model__tier4-hdr-29_xavier-nx-35.5.0.txt",
            [("NVIDIA Jetson Xavier NX", "7.2")],
        ),
        # "Module: Not available", "CUDA Arch BIN: Not available"
        (
            "jetson_stats_raw_tegra-release__jetson-stats-711_agx-thor-r38.txt",
            [("NVIDIA Jetson AGX Thor Developer Kit", "11.0")],
        ),
    ],
)
def test_jetson_stats_names_the_modules_gpu(name: str, expected: list[tuple[str, str]]) -> None:
    assert gpu_models(read_capture(name)) == expected


# rbonghi/jetson_stats#586 (description by zhouyecs, 2024-11-26): a Jetson Nano module.
_NANO_FORM = """Please update jetson-stats with this board

### Board

 - Model: NVIDIA Jetson Nano Developer Kit
 - 699-level Part Number: 699-13448-0002-401 P.0
 - P-Number: p3448-0002
 - BoardIDs: p3448
 - Module: NVIDIA Jetson Nano module (16Gb eMMC)
 - SoC: tegra210
 - CUDA Arch BIN: 5.3
 - Codename: Porg
 - L4T: **MISSING**
 - Jetpack: **MISSING**

### Jetson-Stats

 - Version: 4.2.12

### RAW Data

File from `--error-log` attached
"""
# rbonghi/jetson_stats#864 (description by CHEN88-git, 2026-06-04; cut after the devicetree
# model): the module unknown to jetson-stats, the model and nv_tegra_release known.
_ORIN_MISSING = """Please update jetson-stats with this board

### Board

 - Model: NVIDIA Jetson AGX Orin Developer Kit
 - 699-level Part Number: 699-63701-0001-CS2 B.0
 - P-Number: p3701-0001
 - Module: **MISSING**
 - SoC: tegra234
 - CUDA Arch BIN: 8.7
 - L4T: 39.2.0
 - Jetpack: **MISSING**

### Jetson-Stats

 - Version: 4.3.2

### RAW Data

File from `--error-log` attached

--------------------- PLATFORM -------------------------
Machine: aarch64
System: Linux
Distribution: Ubuntu 24.04 Noble Numbat
Release: 6.8.12-1021-tegra
Python: 3.12.3
-------------------- JETSON RAW OUTPUT -----------------
------------------
Path: /etc/nv_tegra_release
# R39 (release), REVISION: 2.0, GCID: 45755727, BOARD: generic, EABI: aarch64, DATE: Mon Jun  1 \
09:28:48 PM UTC 2026
------------------
Path: /sys/firmware/devicetree/base/model
NVIDIA Jetson AGX Orin Developer Kit
"""
# rbonghi/jetson_stats#779 (description by AnaNicoSerrano88, 2025-12-19; cut after the board
# bullets): neither the module nor its capability known to jetson-stats.
_THOR_MISSING = """Please update jetson-stats with this board

### Board

 - Model: NVIDIA Jetson AGX Thor Developer Kit
 - 699-level Part Number: 699-13834-0008-400 G.5
 - P-Number: p3834-0008
 - Module: **MISSING**
 - SoC: tegra264
 - CUDA Arch BIN: **MISSING**
 - L4T: 38.2.1
 - Jetpack: **MISSING**
"""


def test_board_forms_give_the_jetsons_gpu() -> None:
    assert gpu_models(read_paste(_NANO_FORM)) == [("NVIDIA Jetson Nano module (16Gb eMMC)", "5.3")]
    orin = read_paste(_ORIN_MISSING)
    assert gpu_models(orin) == [("NVIDIA Jetson AGX Orin Developer Kit", "8.7")]
    assert orin.system.l4t_release == "39.2.0"
    assert gpu_models(read_paste(_THOR_MISSING)) == [
        ("NVIDIA Jetson AGX Thor Developer Kit", "11.0")
    ]


# rbonghi/jetson_stats#595 (description by rwttr, 2024-12-18): the "new jetpack" form, no board.
_L4T_ONLY = """Please update jetson-stats with new jetpack

### Linux for Tegra

 - L4T: 36.4.2

### Jetson-Stats

 - Version: 4.2.12
"""


def test_reports_that_name_no_jetson_give_no_gpu() -> None:
    # rbonghi/jetson_stats#515: a carrier board's own model ("lanai-3636"), the module unknown
    carrier = load_case(
        PROBE_CASES / "jetson" / "near_jetson-stats-515_board-form_no-jetson-name.json"
    )
    facts = read_paste(carrier["text"])
    assert (facts.gpus, facts.system.l4t_release) == ([], "32.7.1")
    facts = read_paste(_L4T_ONLY)
    assert (facts.gpus, facts.system.l4t_release) == ([], "36.4.2")
    assert jetson.parse_jetson_board(_L4T_ONLY).gpus == []


def test_the_boards_gpu_gives_way_to_a_tools_list() -> None:
    board = next(fmt for fmt in jetson.FORMATS if fmt.parse is jetson.parse_jetson_board)
    assert board.fallback  # nvidia-smi's "Orin (nvgpu)" row is the same GPU


# --- an issue form's question about the GPU -----------------------------------------------------


def test_the_forms_gpu_question_is_a_gpu_field() -> None:
    # LykosAI/StabilityMatrix#1512: "Gigabyte GeForce RTX™ 3080 VISION OC 10G (rev. 2.0)"
    facts = read_capture("form_gpu_hardware_answer__stabilitymatrix-1512_rtx3080.txt")
    assert gpu_models(facts) == [("Gigabyte GeForce RTX\u2122 3080 VISION OC", "8.6")]
    assert gpus.lookup("NVIDIA\u00ae GeForce RTX\u2122 3080") == gpus.lookup("RTX 3080")


# LykosAI/StabilityMatrix#1171 (description by BrechtCorbeel, 2025-02-23; cut after the OS): an
# AMD card under the same question.
_FORM_AMD = """### Package

I don't get it what is this supposed to be?

### When did the issue occur?

Installing the Package

### What GPU / hardware type are you using?

RX 7900 XTX

### What happened?

It doesn't do what it says it should

### Version

v2.13.3

### What Operating System are you using?

Ubuntu 24.04
"""
# LykosAI/StabilityMatrix#1510 (description by RioMetal33, 2026-01-03; cut in 'What happened?'):
# the whole machine, the CPU first.
_FORM_MACHINE = """### Package

ComfyUI

### When did the issue occur?

Installing the Package

### What GPU / hardware type are you using?

i7-13700K, 32 Gb RAM, NVIDIA RTX 4070 12Gb VRAM, Windows 11

### What happened?

I updated ComfyUI to v0.7.0 and Stability Matrix to v2.15.5 (stable) today.
"""


@pytest.mark.parametrize("text", [_FORM_AMD, _FORM_MACHINE])
def test_answers_that_open_with_no_nvidia_gpu_stay_unread(text: str) -> None:
    assert env_list.parse_env_list(text).gpus == []
    assert not env_list.detect_env_list(text)


# --- a name nvidia-smi cut inside its model number ----------------------------------------------

# irisgali/docs, docs/community/overview.md (cut after the GPU's rows): "a machine containing a
# GeForce RTX 2080 Ti GPU", as nvidia-smi's 418 table shows it.
_TABLE_2080TI = """$ docker run -it --rm --gpus 1 ubuntu nvidia-smi

+-----------------------------------------------------------------------------+
| NVIDIA-SMI 418.116.00   Driver Version: 418.116.00   CUDA Version: N/A      |
|-------------------------------+----------------------+----------------------+
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |
|===============================+======================+======================|
|   0  GeForce RTX 208...  Off  | 00000000:01:00.0 Off |                  N/A |
| 29%   35C    P8    23W / 250W |     10MiB / 10989MiB |      0%      Default |
+-------------------------------+----------------------+----------------------+
"""
# zhiwei-Feng/set_gpu_fans_public, README.md (the fenced run, indented): two cut names beside
# two whole ones.
_TABLE_MIXED = (
    "  liuk@acgpu1 ~ $ nvidia-smi \n"
    "  Sat May 12 02:17:41 2018       \n"
    """  +-----------------------------------------------------------------------------+
  | NVIDIA-SMI 396.24                 Driver Version: 396.24                    |
  |-------------------------------+----------------------+----------------------+
  | GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
  | Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |
  |===============================+======================+======================|
  |   0  GeForce GTX 108...  On   | 00000000:18:00.0 Off |                  N/A |
  | 90%   72C    P2   202W / 250W |   2724MiB / 11178MiB |    100%      Default |
  +-------------------------------+----------------------+----------------------+
  |   1  GeForce GTX 108...  On   | 00000000:3B:00.0 Off |                  N/A |
  | 90%   72C    P2   196W / 250W |   2724MiB / 11178MiB |    100%      Default |
  +-------------------------------+----------------------+----------------------+
  |   2  TITAN V             On   | 00000000:86:00.0 Off |                  N/A |
  | 80%   63C    P2   142W / 250W |   2983MiB / 12066MiB |    100%      Default |
  +-------------------------------+----------------------+----------------------+
  |   3  TITAN V             On   | 00000000:AF:00.0  On |                  N/A |
  | 85%   66C    P2   151W / 250W |   2983MiB / 12066MiB |    100%      Default |
  +-------------------------------+----------------------+----------------------+
"""
)
# NVIDIAGameWorks/rtx-remix#453 (description by demmogaming; the table, cut): cut after the
# number, where the catalogue reads the name as it stands.
_TABLE_AFTER_NUMBER = """\
| NVIDIA-SMI 546.12                 Driver Version: 546.12       CUDA Version: 12.3     |
|-----------------------------------------+----------------------+----------------------+
| GPU  Name                     TCC/WDDM  | Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |         Memory-Usage | GPU-Util  Compute M. |
|                                         |                      |               MIG M. |
|=========================================+======================+======================|
|   0  NVIDIA GeForce RTX 3050 ...  WDDM  | 00000000:01:00.0 Off |                  N/A |
| N/A   52C    P0               7W /  60W |      0MiB /  4096MiB |      0%      Default |
|                                         |                      |                  N/A |
+-----------------------------------------+----------------------+----------------------+
"""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (_TABLE_2080TI, [("GeForce RTX 208", "7.5")]),
        (_TABLE_MIXED, [("GeForce GTX 108", "6.1")] * 2 + [("TITAN V", "7.0")] * 2),
        (_TABLE_AFTER_NUMBER, [("NVIDIA GeForce RTX 3050", "8.6")]),
    ],
)
def test_a_cut_name_carries_the_capability_its_models_share(
    text: str, expected: list[tuple[str, str]]
) -> None:
    assert gpu_models(read_paste(text)) == expected


@pytest.mark.parametrize(
    ("name", "capability"),
    [
        ("nvsmi_table_windows__wsl-6014_rtx2070-wddm.txt", ["7.5"]),  # GeForce RTX 207...
        ("nvsmi_table_390_nocuda_prompt__k8s-62837_4x-gtx108x-390.25.txt", ["6.1"] * 4),
        # "NVIDIA GeForce ...": every GeForce may follow
        ("nvsmi_table_windows_tcc_wddm__wsl-9254_p100-geforce-526.98.txt", ["6.0", None]),
    ],
)
def test_corpus_tables_with_cut_names(name: str, capability: list[str | None]) -> None:
    assert [g.compute_capability for g in read_capture(name).gpus] == capability


@pytest.mark.parametrize(
    ("start", "capability"),
    [
        ("GeForce RTX 208", "7.5"),
        ("GeForce GTX 165", "7.5"),
        ("Quadro RTX 500", "7.5"),
        ("GeForce RTX 205", "8.6"),  # RTX 2050 is Ampere
        ("GeForce RTX 20", None),  # RTX 2050 (8.6) or RTX 2060-2080 (7.5)
        ("GeForce GTX 96", None),  # GTX 960 (5.2) or GTX 960M (5.0)
        ("NVIDIA RTX 600", None),  # not a GeForce number: RTX 6000 Ada, RTX 6000D, ...
        ("GeForce GT 710", None),  # a whole number, which the catalogue may not know
        ("NVIDIA GeForce", None),
    ],
)
def test_a_cut_number_gives_a_capability_only_where_every_model_agrees(
    start: str, capability: str | None
) -> None:
    assert gpus.cut_capability(start) == capability


def test_a_whole_name_in_the_table_takes_no_cut_capability() -> None:
    row = "|   0  GeForce RTX 2080    Off  | 00000000:01:00.0 Off |                  N/A |\n"
    assert nvidia_smi.parse_table(row).gpus[0].compute_capability is None  # the catalogue's


# --- a tool that cannot detect the writer's GPU -------------------------------------------------

# jamiepine/voicebox#127 (comment by Ryderjj89, 2026-02-24).
_CANNOT_DETECT = (
    "Lol why is this referenced in the latest version as something being fixed when it's not?"
    " Latest version on WINDOWS still can't detect my RTX 3060.\n"
)


def test_a_tool_that_cannot_detect_the_gpu_names_it() -> None:
    assert gpu_models(read_paste(_CANNOT_DETECT)) == [("RTX 3060", "8.6")]
