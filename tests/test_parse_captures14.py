"""The shapes capture set 14 read: nvidia-smi's placeholders where a GPU's name should be, a driver
after the GPU's name on a "GPU:" line, a driver's branch before its number, dxdiag's Display
Devices and its tab-separated dump, Steam's "Video Card:", NVIDIA Control Panel's System
Information report, jtop-style and jetsonInfo JetPack lines, the oldest GPUs in the catalogue; and
the near misses beside them that must stay unread."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from checks.facts import gpus
from checks.facts.model import Gpu, HostFacts, merge
from checks.facts.parsers import env_list, jetson, nvidia_smi, windows_devices
from tests.support.captures import read_capture


def _gpus(facts: HostFacts) -> list[tuple[str | None, str | None, str | None]]:
    return [(g.name, g.compute_capability, g.pci_device_id) for g in facts.gpus]


# --- nvidia-smi's placeholders are never a name ---------------------------------------------------


def test_an_err_name_cell_leaves_the_gpu_unnamed() -> None:
    facts = read_capture("nvsmi_table_err_name_row__gpu-operator-559_a40-525.125.06.txt")
    assert [(g.index, g.name) for g in facts.gpus] == [(0, None), (1, "NVIDIA A40")]
    assert facts.gpus[0].pci_bus_id == "00000000:19:00.0"


@pytest.mark.parametrize(
    ("parse", "text"),
    [
        (
            nvidia_smi.parse_query_csv,
            "index, name, pci.bus_id\n0, [Unknown Error], 00000000:01:00.0",
        ),
        (nvidia_smi.parse_query_csv, "index, name, pci.bus_id\n0, ERR!, 00000000:01:00.0"),
        (nvidia_smi.parse_query_text, "GPU 00000000:01:00.0\n    Product Name : [GPU is lost]"),
        (nvidia_smi.parse_query_text, "GPU 00000000:01:00.0\n    Product Name : N/A"),
        (nvidia_smi.parse_list, "GPU 0: ERR! (UUID: GPU-0a1b2c3d-0000-0000-0000-000000000000)"),
    ],
)
def test_a_placeholder_is_no_name_in_any_nvidia_smi_output(
    parse: Callable[[str], HostFacts], text: str
) -> None:
    facts = parse(text)
    assert len(facts.gpus) == 1 and facts.gpus[0].name is None


# --- a driver after the GPU's name, a branch before the driver ------------------------------------


def test_fastfetch_gpu_line_with_its_driver_field() -> None:
    facts = read_capture("fastfetch_gpu_driver_suffix__fastfetch-597_gtx750ti-535.113.01.txt")
    assert _gpus(facts) == [("NVIDIA GeForce GTX 750 Ti", "5.0", None)]
    assert facts.driver.version == "535.113.01"


def test_driver_in_brackets_after_the_gpu() -> None:
    facts = read_capture("prose_os_gpu_driver_paren__nvitop-55_rtx3080-531.18.txt")
    assert [g.name for g in facts.gpus] == ["RTX 3080"]
    assert facts.driver.version == "531.18"


@pytest.mark.parametrize(
    "text",
    [
        "GPU: NVIDIA GeForce RTX 3090 24GB",  # memory, not a driver
        "GPU: NVIDIA GeForce GTX 1080 (8.0)",  # no driver's shape
        "GPU: NVIDIA GeForce GTX 1080 (384.98",  # an unclosed bracket
        "GPU: Radeon RX 580 535.113.01",  # no NVIDIA GPU before it
    ],
)
def test_no_driver_without_its_shape_after_a_gpu(text: str) -> None:
    assert env_list.parse_env_list(text).driver.version is None


def test_the_drivers_branch_before_its_number() -> None:
    facts = read_capture("issue_template_nsd_driver__nvidia-patch-1110_gtx1650-616.56.txt")
    assert facts.driver.version == "616.56"
    assert [g.name for g in facts.gpus] == ["GTX 1650"]


@pytest.mark.parametrize(
    "text",
    [
        "- Nvidia driver version: NSD 616.56",  # one fact is no list
        "- Nvidia driver version: NSDX 616.56",
        "GPU: NVIDIA GeForce GTX 1080\nDriver: Studio",
    ],
)
def test_driver_lines_that_stay_unread(text: str) -> None:
    assert env_list.parse_env_list(text).driver.version is None


# --- Windows display reports ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "driver", "found"),
    [
        (
            "dxdiag_display_after_dxva__helix-963_nvs5200m.txt",
            None,
            [("NVIDIA NVS 5200M", "2.1", "10de:0dfc")],
        ),
        (
            "dxdiag_display_ko_monitor__avprovideo-1062_g210-314.22.txt",
            "314.22",
            [("NVIDIA GeForce G210", "1.2", "10de:0a60")],
        ),
        # the Intel adapter's block first: not read
        (
            "dxdiag_display_intel_then_nvidia__anclora-aura-reflect_rtx3050-laptop-555.99.txt",
            "555.99",
            [("NVIDIA GeForce RTX 3050 4GB Laptop GPU", "8.6", "10de:25ab")],
        ),
        (
            "dxdiag_xml_tabbed_sz__nwjs-7319_10de-1e84-461.09.txt",
            "461.09",
            [(None, None, "10de:1e84")],
        ),
        # szDriverName's paths wrapped onto lines of their own
        (
            "dxdiag_tabbed_sz_readme__m5-kaggle-share_gtx1660s-442.74.txt",
            "442.74",
            [("NVIDIA GeForce GTX 1660 SUPER 6 GB", "7.5", "10de:21c4")],
        ),
        (
            "steam_sysinfo_video_card__source1games-367_gtx275-320.00.txt",
            "320.00",
            [("NVIDIA GeForce GTX 275", "1.3", "10de:05e6")],
        ),
        (
            "nvsysinfo_report_tabs__shizuku-8_gtx970-388.13.txt",
            "388.13",
            [("GeForce GTX 970", "5.2", "10de:13c2")],
        ),
    ],
)
def test_windows_display_reports(
    name: str, driver: str | None, found: list[tuple[str | None, str | None, str | None]]
) -> None:
    facts = read_capture(name)
    assert facts.driver.version == driver
    assert _gpus(facts) == found


def test_dxdiags_zero_padded_driver_version() -> None:
    assert windows_devices.nvidia_driver("27.21.0014.6109") == "461.09"
    assert windows_devices.nvidia_driver("9.18.13.1422") == "314.22"
    assert windows_devices.nvidia_driver("32.0.101.5768") is None  # Intel's


@pytest.mark.parametrize(
    "text",
    [
        # another vendor's adapter, its Vendor ID shown
        "Card name: AMD Radeon RX 580\nVendor ID: 0x1002\nDevice ID: 0x67DF\n"
        "Driver Version: 27.20.14501.18003",
        # Steam's sound card: "Driver:" outside a Video Card section
        "Sound card:\n    Audio device:  Speakers (Realtek High Definition Audio)\n"
        "    Driver:  NVIDIA GeForce GTX 275",
        # NVIDIA's audio function in a dxdiag dump
        "szDescription\tNVIDIA High Definition Audio\nszDriverVersion\t1.3.38.60",
    ],
)
def test_windows_reports_that_name_no_nvidia_gpu(text: str) -> None:
    facts = windows_devices.parse_windows_devices(text)
    assert (facts.gpus, facts.driver.version) == ([], None)


def test_a_gpu_named_with_and_without_nvidia_is_one_gpu() -> None:
    facts = read_capture("ggmlinit_windows_server__llamacpp-15609_quadro-p2000.txt")
    assert [g.name for g in facts.gpus] == ["Quadro P2000"]
    one = merge(
        HostFacts(gpus=[Gpu(name="Quadro P2000")]),
        HostFacts(gpus=[Gpu(name="NVIDIA Quadro P2000")]),
    )
    assert [g.name for g in one.gpus] == ["Quadro P2000"]
    two = merge(
        HostFacts(gpus=[Gpu(name="Quadro P2000")]),
        HostFacts(gpus=[Gpu(name="NVIDIA Quadro P4000")]),
    )
    assert len(two.gpus) == 2


# --- Jetson ---------------------------------------------------------------------------------------


def test_jetpack_version_line_with_its_l4t() -> None:
    facts = read_capture("pr_test_env_jetpack_arch__ethminer-pr2171_xavier-32.4.4.txt")
    assert (facts.system.l4t_release, facts.system.jetpack_release) == ("32.4.4", "4.4.1")


def test_jetsoninfo_before_and_after_a_fix() -> None:
    facts = read_capture("jetsoninfo_before_after__jetsonutilities-pr3_tx1-28.2.0.txt")
    assert (facts.system.l4t_release, facts.system.jetpack_release) == ("28.2.0", "3.3")


def test_jetsoninfo_naming_two_jetpacks_for_one_l4t_names_none() -> None:
    text = " L4T 32.4.4 [ JetPack 4.4.1 ]\n L4T 32.4.4 [ JetPack 4.4 ]\n"
    assert jetson.parse_jetson_release(text).system.jetpack_release is None


# --- the oldest GPUs in the catalogue -------------------------------------------------------------


def test_tesla_generation_gpus_in_an_nvidia_smi_340_table() -> None:
    facts = read_capture("nvsmi_table_340_two_gpus__mumax3-80_geforce210-nvs290-340.96.txt")
    assert [(g.name, g.compute_capability) for g in facts.gpus] == [
        ("GeForce 210", "1.2"),
        ("Quadro NVS 290", "1.1"),
    ]


@pytest.mark.parametrize(
    ("name", "cc"),
    [
        ("GeForce GTX 285", "1.3"),
        ("GeForce GT 240", "1.2"),
        ("GeForce G210M", "1.2"),
        ("GeForce GTX 260M", None),  # a G92, 1.1: not in the catalogue
        ("GeForce GTX 2080", None),
        ("NVIDIA GeForce 2100", None),
    ],
)
def test_old_names_the_catalogue_knows_and_does_not(name: str, cc: str | None) -> None:
    model = gpus.lookup(name)
    assert (model.compute_capability if model else None) == cc


def test_tesla_is_never_read_as_an_architecture() -> None:
    assert gpus.normalise_architecture("Tesla") is None
    assert gpus.normalise_architecture("Fermi") == "Fermi"
