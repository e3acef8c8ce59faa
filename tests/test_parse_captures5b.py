"""Readers added for the rest of capture set 5: Windows WMI / dxdiag listings and TensorFlow's
device lines; each reads NVIDIA's GPU objects and leaves look-alikes alone."""

from __future__ import annotations

from checks.facts.parsers import tf_devices, windows_devices

PNP = (
    "DeviceClass             : DISPLAY\n"
    "DeviceID                : PCI\\VEN_10DE&DEV_17C8&SUBSYS_49983842&REV_A1\\4&14144E6&0&00E4\n"
    "DeviceName              : NVIDIA GeForce GTX 980 Ti\n"
    "DriverProviderName      : NVIDIA\n"
    "DriverVersion           : 22.21.13.8253\n"
    "\n"
    "DeviceClass             : MEDIA\n"
    "DeviceID                : HDAUDIO\\FUNC_01&VEN_10DE&DEV_0070\n"
    "DeviceName              : NVIDIA High Definition Audio\n"
    "DriverVersion           : 1.3.34.27\n"
)


def test_windows_driver_numbers_follow_nvidia_s_scheme() -> None:
    """The third field less 10 and the fourth, as NNN.NN (CaffeineMC/sodium, mpv-AnimeJaNai#81)."""
    assert windows_devices.nvidia_driver("22.21.13.8253") == "382.53"
    assert windows_devices.nvidia_driver("31.0.15.5222") == "552.22"
    assert windows_devices.nvidia_driver("31.0.15.7652") == "576.52"
    assert windows_devices.nvidia_driver("30.0.14.7111") == "471.11"
    assert windows_devices.nvidia_driver("31.0.15.522") == "505.22"


def test_other_windows_versions_are_no_nvidia_driver() -> None:
    for version in ("27.20.100.8681", "31.0.24033.1003", "1.3.34.27", "30.00.0014.7242 (English)"):
        assert windows_devices.nvidia_driver(version) is None


def test_pnp_signed_driver_gives_the_gpu_its_id_and_the_driver() -> None:
    facts = windows_devices.parse_windows_devices(PNP)
    assert facts.driver.version == "382.53"
    assert [(g.name, g.pci_device_id) for g in facts.gpus] == [
        ("NVIDIA GeForce GTX 980 Ti", "10de:17c8")
    ]


def test_wmic_table_and_value_forms() -> None:
    table = (
        "DriverVersion   Name\n"
        "31.0.15.5222    NVIDIA GeForce RTX 4090\n"
        "27.20.100.8681  Intel(R) UHD Graphics 630\n"
    )
    facts = windows_devices.parse_windows_devices(table)
    assert (facts.driver.version, [g.name for g in facts.gpus]) == (
        "552.22",
        ["NVIDIA GeForce RTX 4090"],
    )
    value = (
        "AdapterCompatibility=NVIDIA\nDriverVersion=31.0.15.5222\nName=NVIDIA GeForce RTX 3060\n"
    )
    facts = windows_devices.parse_windows_devices(value)
    assert (facts.driver.version, [g.name for g in facts.gpus]) == (
        "552.22",
        ["NVIDIA GeForce RTX 3060"],
    )


def test_windows_near_misses() -> None:
    """A GPU-like name with nothing saying it is a display device, an audio function, Intel's
    adapter, and dxdiag's driver file lines are not read."""
    for text in (
        "Name : NVIDIA GeForce RTX 3060\nStatus : OK\n",
        "DeviceName : NVIDIA High Definition Audio\nDeviceClass : MEDIA\n"
        "DriverVersion : 1.3.34.27\n",
        "Caption : Intel(R) UHD Graphics 630\nAdapterCompatibility : Intel Corporation\n"
        "DriverVersion : 27.20.100.8681\n",
        "   Driver: C:\\WINDOWS\\system32\\DRIVERS\\NVIDIA Corporation\\Drs\\dbInstaller.exe,"
        " 30.00.0014.7242 (English)\n",
        "     Name: NVIDIA Quadro M2200\nVendor: NVIDIA\n",
    ):
        assert not windows_devices.detect_windows_devices(text), text
        facts = windows_devices.parse_windows_devices(text)
        assert (facts.driver.version, facts.gpus) == (None, [])


def test_dxdiag_system_devices() -> None:
    text = (
        "     Name: NVIDIA Quadro M2200\n"
        "Device ID: PCI\\VEN_10DE&DEV_1436&SUBSYS_224D17AA&REV_A1\\4&2D211F3D&0&0008\n"
        "   Driver: C:\\WINDOWS\\system32\\DRIVERS\\nvlddmkm.sys, 30.00.0014.7242 (English)\n"
    )
    facts = windows_devices.parse_windows_devices(text)
    assert facts.driver.version is None
    assert [(g.name, g.pci_device_id) for g in facts.gpus] == [("NVIDIA Quadro M2200", "10de:1436")]


def _tf(text: str) -> list[tuple[str | None, str | None]]:
    return [(g.name, g.compute_capability) for g in tf_devices.parse_tf_devices(text).gpus]


def test_tensorflow_1_found_device_lines() -> None:
    text = (
        "I tensorflow/core/common_runtime/gpu/gpu_device.cc:940] Found device 0 with properties: \n"
        "name: Quadro M1200\n"
        "major: 5 minor: 0 memoryClockRate (GHz) 1.148\n"
        "I gpu_device.cc:1640] Found device 1 with properties: \n"
        "name: Tesla M40 24GB major: 5 minor: 2 memoryClockRate(GHz): 1.112\n"
        "pciBusID: 0000:05:00.0\n"
    )
    assert _tf(text) == [("Quadro M1200", "5.0"), ("Tesla M40 24GB", "5.2")]


def test_tensorflow_2_found_device_line() -> None:
    text = (
        "I gpu_device.cc:1555] Found device 0 with properties: \n"
        "pciBusID: 0000:01:00.0 name: Tesla T4 computeCapability: 7.5\n"
        "coreClock: 1.59GHz coreCount: 40 deviceMemorySize: 15.75GiB\n"
    )
    gpus = tf_devices.parse_tf_devices(text).gpus
    assert [(g.name, g.compute_capability, g.pci_bus_id) for g in gpus] == [
        ("Tesla T4", "7.5", "0000:01:00.0")
    ]


def test_created_and_ignored_devices_name_one_gpu_each() -> None:
    text = (
        "Found device 0 with properties: \nname: GeForce 820M major: 2 minor: 1\n"
        "Ignoring visible gpu device (device: 0, name: GeForce 820M, pci bus id: 0000:08:00.0,"
        " compute capability: 2.1) with Cuda compute capability 2.1.\n"
        "Created TensorFlow device (/job:localhost/replica:0/task:0/device:GPU:1 with 10175 MB"
        " memory) -> physical GPU (device: 1, name: Tesla T4, pci bus id: 0000:00:07.0,"
        " compute capability: 7.5)\n"
    )
    assert _tf(text) == [("GeForce 820M", "2.1"), ("Tesla T4", "7.5")]


def test_tensorflow_near_misses() -> None:
    """A bare "name:" line, a device found with no properties shown, and prose are not read."""
    for text in (
        "name: GeForce GTX 1080 major: 6 minor: 1\n",
        "Found device 0 with properties: \n2019 I gpu_device.cc:1746] Adding visible gpu devices\n",
        "TensorFlow found device 0 with properties: name: GeForce GTX 1080\n",
        "Found device 0 with properties:\n" + "\n" * 5 + "name: GeForce GTX 1080\n",
    ):
        assert not tf_devices.detect_tf_devices(text), text
