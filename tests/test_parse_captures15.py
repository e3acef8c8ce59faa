"""The shapes capture set 15 read: PyTorch's capability warning with a title, a warning class or a
compose prefix before the GPU's name, `modinfo -F version nvidia` answered outside its fence,
Jetson's "Orin (nvgpu)" table row, a Windows table row cut in its bus id, gpufetch's PCI ids,
ollama's NVML library, a backticked driver in prose; and the near misses that must stay unread."""

from __future__ import annotations

import pytest

from checks.facts import capture, gpus
from checks.facts.parsers import (
    collect_env,
    driver_prose,
    gpufetch,
    kernel,
    nvidia_smi,
    ollama,
)
from tests.support.captures import read_capture

# --- a capability warning's GPU name, past what a paste puts before it ------------------------


# Real first lines: AUTOMATIC1111/stable-diffusion-webui#16884 (its title),
# dmMaze/BallonsTranslator#825 (its description), devnen/Chatterbox-TTS-Server#64 (compose's log).
_WARNED = [
    "[Bug]: UserWarning: NVIDIA GeForce RTX 5070 Ti with CUDA capability sm_120 is not compatible"
    " with the current PyTorch installation. The current PyTorch install supports CUDA"
    " capabilities sm_50 sm_60 s",
    "Bug Report:NVIDIA GeForce RTX 5070 Ti with CUDA capability sm_120 is not compatible with the"
    " current PyTorch installation.",
    "chatterbox-tts-server-1  | NVIDIA GeForce RTX 5070 Ti with CUDA capability sm_120 is not"
    " compatible with the current PyTorch installation.",
]


@pytest.mark.parametrize("text", _WARNED)
def test_a_title_or_a_prefix_is_no_part_of_the_warned_name(text: str) -> None:
    facts = gpus.enrich(capture.parse(capture.Capture("paste", text + "\n")))
    assert [(g.name, g.compute_capability) for g in facts.gpus] == [
        ("NVIDIA GeForce RTX 5070 Ti", "12.0")
    ]


@pytest.mark.parametrize(
    ("line", "name"),
    [
        ("[Bug]: NVIDIA GeForce RTX 5090", "NVIDIA GeForce RTX 5090"),
        ("/x/torch/cuda/__init__.py:235: UserWarning: NVIDIA B200", "NVIDIA B200"),
        ("INFO 05-01 12:00:00 [x.py:12] NVIDIA RTX PRO 6000", "NVIDIA RTX PRO 6000"),
        ("2025-05-01 12:00:00,123 NVIDIA GeForce RTX 5090", None),
        ("[Bug]: ", None),
    ],
)
def test_only_a_name_is_left_of_a_warning_line(line: str, name: str | None) -> None:
    text = (
        f"{line} with CUDA capability sm_120 is not compatible with the current PyTorch"
        " installation."
    )
    assert [g.name for g in collect_env.parse_collect_env(text).gpus] == ([name] if name else [])


# --- modinfo -F version nvidia --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "version"),
    [
        ("form_env_modinfo_nvsmi_failed__fedora-guide-9_580.105.08.txt", "580.105.08"),
        ("md_howto_modinfo_nvml_mismatch__fedora-guide-18_580.126.18-580.142.txt", "580.126.18"),
    ],
)
def test_modinfo_f_version_is_read_outside_its_fence(name: str, version: str) -> None:
    assert read_capture(name).modules.nvidia_version == version


@pytest.mark.parametrize(
    "text",
    [
        "$ modinfo -F version nvidia\nmodinfo: ERROR: Module nvidia not found.\n",
        "modinfo -F version nvidia\nprints the version, e.g.\n\n580.105.08\n",
        "modinfo -F version nvidia\n\n\n\n\n\n\n580.105.08\n",
        "modinfo -F version nvidia-drm\n580.105.08\n",
        "run modinfo -F version nvidia\n580.105.08\n",
    ],
)
def test_modinfo_f_version_near_misses_stay_unread(text: str) -> None:
    assert kernel.parse_modinfo_f_version(text).modules.nvidia_version is None
    assert not kernel.detect_modinfo_f_version(text)


# --- nvidia-smi: Jetson's integrated GPU, a row cut in its bus id ---------------------------------


def test_jetsons_orin_row_is_read_without_a_bus_id() -> None:
    facts = read_capture("nvsmi_L_table_orin_nvgpu__jetpack-nixos-pr371_orin-540.4.0.txt")
    assert facts.driver.version == "540.4.0"
    assert [(g.name, g.compute_capability, g.pci_bus_id) for g in facts.gpus] == [
        ("Orin (nvgpu)", "8.7", None)
    ]


def test_a_wddm_row_cut_in_its_bus_id_is_read_as_the_last_line() -> None:
    facts = read_capture("form_nvcc_nvsmi_windows_wddm__mistralrs-1099_rtx4090-571.96.txt")
    assert [(g.index, g.name, g.compute_capability) for g in facts.gpus] == [
        (0, "NVIDIA GeForce RTX 4090", "8.9")
    ]


_HEAD = (
    "| NVIDIA-SMI 571.96                 Driver Version: 571.96         CUDA Version: 12.8     |\n"
    "| GPU  Name                  Driver-Model | Bus-Id          Disp.A | Volatile Uncorr. ECC |\n"
)


@pytest.mark.parametrize(
    "tail",
    [
        "|   0  NVIDIA GeForce RTX 4090      WDDM  |   0000000\nsomething after it\n",
        "|   0  NVIDIA GeForce RTX 4090      WDDM  |   see below\n",
        "|   0  NVIDIA GeForce RTX 4090      WDDM  \n",
        "|   0  NVIDIA GeForce RTX 4090      WDDM  | 00000000:01:00.0 Off\n",
    ],
)
def test_a_cut_row_near_miss_is_no_gpu(tail: str) -> None:
    assert nvidia_smi.parse_table(_HEAD + tail).gpus == []


def test_a_cut_row_needs_the_tables_column_header() -> None:
    text = "|   0  NVIDIA GeForce RTX 4090      WDDM  |   0000000\n"
    assert nvidia_smi.parse_table(text).gpus == []


# --- gpufetch ------------------------------------------------------------------------------------


def test_gpufetchs_pci_id_is_read_once() -> None:
    facts = read_capture("gpufetch_pci_id_only__nixpkgs-516500_10de-21c4.txt")
    assert [(g.index, g.name, g.pci_device_id) for g in facts.gpus] == [(0, None, "10de:21c4")]


@pytest.mark.parametrize(
    "text",
    [
        "[ERROR]: No GPU was detected! Available GPUs are:\n- GPU 0:\n  * Vendor: Intel\n"
        "  * PCI id: 8086:9bc4\n",
        "- GPU 0:\n  * Vendor: NVIDIA\n  * PCI id: 10de:21c4\n",
        "[ERROR]: No GPU was detected! Available GPUs are:\n\n- GPU 0:\n  * Vendor: NVIDIA\n"
        "  * PCI id: 10de:21c4\n",
    ],
)
def test_gpufetch_near_misses_stay_unread(text: str) -> None:
    assert gpufetch.parse_gpufetch(text).gpus == []
    assert not gpufetch.detect_gpufetch(text)


# --- ollama's NVML library -----------------------------------------------------------------------


def test_ollamas_nvml_library_is_its_version() -> None:
    facts = read_capture("ollama_debug_nvml_err18_nix__ollama-flake-4_545.29.06.txt")
    assert facts.driver.nvml_library_version == "545.29.06"
    assert facts.driver.version is None  # err 18: the kernel module's version differs


def test_two_nvml_libraries_are_none() -> None:
    text = (
        "wiring nvidia management library functions in /a/libnvidia-ml.so.545.29.06\n"
        "wiring nvidia management library functions in /b/libnvidia-ml.so.535.104.05\n"
    )
    assert ollama.parse_ollama(text).driver.nvml_library_version is None


# --- a backticked driver in prose ----------------------------------------------------------------


def test_a_backticked_driver_is_read_in_prose() -> None:
    facts = read_capture("prose_driver_backticks_ffmpeg_plex__libnvc-241_550.54.14.txt")
    assert facts.driver.version == "550.54.14"


@pytest.mark.parametrize(
    "text",
    [
        "It needs driver version `550.54.14` or later.",
        "driver version `550.54.14`, and 535.104.05 before it",
        "driver version `550.54.14.1`",
    ],
)
def test_backticked_driver_near_misses_stay_unread(text: str) -> None:
    assert driver_prose.parse_driver_prose(text).driver.version is None
