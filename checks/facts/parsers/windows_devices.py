"""Windows device listings: WMI / CIM (PowerShell, wmic), dxdiag, Steam's System Information and
NVIDIA Control Panel's report name the GPU, its PCI id and the driver.

PowerShell lists one object per block of "Key : value" lines (`Get-WmiObject` /
`Get-CimInstance Win32_VideoController | fl *`, KhronosGroup/Vulkan-Loader#283;
`Win32_PnPSignedDriver`, lord-carlos/nvidia-update#1); `wmic ... get /value` writes "Key=value",
`ConvertTo-Json` '"Key":  "value",', and `wmic ... get Name,DriverVersion` a table under a header
of property names. dxdiag's "System Devices" gives a "Name:" and the "Device ID:" under it
(rcmaehl/WhyNotWin11#58); its "Driver:" lines there carry file versions and are never read.

    Caption                      : NVIDIA GeForce GTX 1660
    DeviceName              : NVIDIA GeForce GTX 980 Ti
    DriverVersion           : 22.21.13.8253
    HardWareID              : PCI\\VEN_10DE&DEV_17C8&SUBSYS_49983842&REV_A1

An object counts only when its name is an NVIDIA GPU's (not the HD Audio or USB function) and it
is a display device: a Win32_VideoController, class DISPLAY, adapter or provider NVIDIA, a
PCI\\VEN_10DE id, or a DriverVersion of NVIDIA's form. That DriverVersion is Windows' file-style
version of NVIDIA's driver, whose number is the third field less 10 and the fourth, as five digits
with a dot before the last two: 22.21.13.8253 -> 382.53, 31.0.15.5222 -> 552.22. Sodium's
maintainers read it so ("driver 526.47 is represented as X.Y.15.2657", NvidiaDriverVersion.java:
https://github.com/CaffeineMC/sodium/blob/fe5fe6cf2184741bbf85da8a183dc145ff06b288/common/src/workarounds/java/net/caffeinemc/mods/sodium/client/compatibility/workarounds/nvidia/NvidiaDriverVersion.java
), and mpv-AnimeJaNai's maintainer verified 31.0.15.7652 -> 576.52 (the-database/mpv-AnimeJaNai#81).
"""

from __future__ import annotations

import re

from checks.facts.model import Gpu, HostFacts
from checks.facts.parsers import Format
from checks.facts.probe import Probe

# "Key : value" (PowerShell), "Key=value" (wmic /value), '"Key":  "value",' (ConvertTo-Json).
_PAIR = re.compile(
    r'^[ \t]{0,12}"?([A-Za-z_][A-Za-z_]{1,40})"?[ \t]{0,40}(?::|=)'
    r'[ \t]{0,4}"?([^"\n]{0,300})"?,?[ \t]{0,20}$'
)
_NAME_KEYS = ("Name", "DeviceName", "Caption", "Description")
_GPU_NAME = re.compile(r"(?:NVIDIA |GeForce |Quadro |Tesla |TITAN )[^\n]{1,100}")
_NOT_GPU = re.compile(r"Audio|USB|Virtual|SHIELD|Controller|Bus|Switch|Ethernet", re.IGNORECASE)
_PCI_ID = re.compile(r"PCI\\{1,2}VEN_10DE&DEV_([0-9A-Fa-f]{4})")
_DRIVER = re.compile(r"\d{1,2}\.\d{1,2}\.0{0,2}(1\d)\.(\d{1,4})")
_DISPLAY = (
    ("__CLASS", "Win32_VideoController"),
    ("CreationClassName", "Win32_VideoController"),
    ("DeviceClass", "DISPLAY"),
    ("AdapterCompatibility", "NVIDIA"),
    ("DriverProviderName", "NVIDIA"),
)
_ID_KEYS = ("PNPDeviceID", "DeviceID", "HardWareID", "CompatID")
# A wmic or Format-Table header: property names only, one of them a name.
_WORD = re.compile(r"\S+")
_TABLE_KEYS = frozenset(_NAME_KEYS + _ID_KEYS + ("DriverVersion", "AdapterCompatibility"))
_DXDIAG = re.compile(
    r"^[ \t]{0,8}Name: ((?:NVIDIA |GeForce |Quadro |Tesla |TITAN )[^\n]{1,100})\n"
    r"[ \t]{0,8}Device ID: PCI\\VEN_10DE&DEV_([0-9A-Fa-f]{4})",
    re.MULTILINE,
)


def nvidia_driver(windows_version: str) -> str | None:
    """NVIDIA's driver number from Windows' a.b.c.d form: 22.21.13.8253 -> 382.53, and dxdiag's
    zero-padded 27.21.0014.6109 -> 461.09."""
    found = _DRIVER.fullmatch(windows_version.strip())
    if found is None:
        return None
    merged = (int(found.group(1)) - 10) * 10000 + int(found.group(2))
    return f"{merged // 100}.{merged % 100:02d}" if merged >= 10000 else None


def _records(text: str) -> list[dict[str, str]]:
    """Each block of key/value lines as a dict. A blank or unindented other line, or a key seen
    already, ends a block; an indented other line is a wrapped value and is passed over."""
    records: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for line in text.splitlines():
        pair = _PAIR.match(line)
        if pair is None and line[:1] in (" ", "\t") and line.strip():
            continue
        if pair is None or pair.group(1) in current:
            if current:
                records.append(current)
            current = {}
        if pair is not None:
            current[pair.group(1)] = pair.group(2).strip()
    if current:
        records.append(current)
    return records + _tables(text)


def _tables(text: str) -> list[dict[str, str]]:
    """Rows of a wmic / Format-Table listing, cut at the header's column starts."""
    records: list[dict[str, str]] = []
    columns: list[tuple[str, int]] = []
    for line in text.splitlines():
        words = [(m.group(0), m.start()) for m in _WORD.finditer(line)]
        if words and all(w in _TABLE_KEYS for w, _ in words):
            columns = words if any(w in _NAME_KEYS for w, _ in words) else []
            continue
        if not columns or not line.strip() or set(line.strip()) <= {"-", " "}:
            columns = columns if line.strip() else []
            continue
        ends = [start for _, start in columns[1:]] + [len(line)]
        records.append(
            {key: line[start:end].strip() for (key, start), end in zip(columns, ends, strict=True)}
        )
    return records


def _gpu(record: dict[str, str]) -> tuple[str, str | None] | None:
    """(name, PCI device id) when the record is an NVIDIA display device."""
    name = next((record[k] for k in _NAME_KEYS if _GPU_NAME.fullmatch(record.get(k, ""))), None)
    if name is None or _NOT_GPU.search(name):
        return None
    ids = (_PCI_ID.match(record.get(k, "")) for k in _ID_KEYS)
    pci = next((m.group(1).lower() for m in ids if m), None)
    display = any(record.get(key, "").startswith(value) for key, value in _DISPLAY)
    driver = nvidia_driver(record.get("DriverVersion", ""))
    return (name, f"10de:{pci}" if pci else None) if display or pci or driver else None


# Display reports, one block of "Key: value" lines per adapter: dxdiag's Display Devices
# ("Card name:", "Device Key: Enum\\PCI\\VEN_10DE&DEV_0A60...", "Driver Version: 9.18.13.1422",
# ioi/avprovideo#1062), the tab-separated dump of its fields ("szDescription<TAB>NAME",
# "szDriverVersion<TAB>27.21.0014.6109", nwjs/nw.js#7319), Steam's System Information "Video
# Card:" section ("Driver:  NAME", "VendorID:  0x10de", "DeviceID:  0x5e6") and NVIDIA Control
# Panel's System Information report ("GPU processor:", "Driver version:  388.13", "Device Id:
# 10DE 13C2 85081043"). A block starts at its first key and ends at the next adapter's, at a
# line that is no pair (a wrapped dump value aside) or at a new section's "Header:".
_REPORT_KEY = re.compile(r"[A-Za-z][\w /'().-]{0,48}")
_REPORT_START = ("card name", "gpu processor", "video card", "szdescription")
_REPORT_NAMES = ("card name", "gpu processor", "directx card", "szdescription")
_REPORT_VENDORS = ("vendor id", "vendorid", "szvendorid")
_REPORT_PCI_KEYS = ("device key", "szkeydeviceid")
_REPORT_IDS = ("device id", "deviceid", "szdeviceid")
_REPORT_DRIVERS = ("driver version", "szdriverversion")
_HEX_ID = re.compile(r"0x0{0,4}([0-9A-Fa-f]{1,4})")
_NVCP_ID = re.compile(r"10DE ([0-9A-Fa-f]{4})(?: [0-9A-Fa-f]{8})?")
_NVIDIA_VERSION = re.compile(r"\d{3}\.\d{2}")


def _report_pair(line: str) -> tuple[str, str] | None:
    """(key lower-cased, value) of a report line: "Key: value" or dxdiag's "szKey<TAB>value"."""
    rest = line.lstrip()
    tabbed = rest.startswith("sz") and "\t" in rest
    key, sep, value = rest.partition("\t" if tabbed else ":")
    key = key.strip()
    if not sep or _REPORT_KEY.fullmatch(key) is None:
        return None
    return " ".join(key.lower().split()), value.strip()


def _report_blocks(text: str) -> list[dict[str, str]]:
    """The key/value blocks of each adapter in a display report; the first value of a key wins.

    A dump's block ends at a blank line, and a line of its own there is a value wrapped onto it.
    """
    blocks: list[dict[str, str]] = []
    current: dict[str, str] | None = None
    dump = False
    for line in text.splitlines():
        pair = _report_pair(line) if line.strip() else None
        starts_dump = pair is not None and pair[0].startswith("sz") and current is None
        if pair is not None and (pair[0] in _REPORT_START or starts_dump):
            current = {}
            blocks.append(current)
            dump = pair[0].startswith("sz")
        if current is None:
            continue
        if not line.strip():
            current = None if dump else current
        elif pair is None:
            current = current if dump else None
        elif not pair[1] and not dump and line[:1] not in (" ", "\t"):
            current = None if pair[0] not in _REPORT_START else current  # Steam's "Memory:"
        else:
            current.setdefault(*pair)
    return blocks


def _report_gpu(block: dict[str, str]) -> tuple[Gpu, str | None] | None:
    """The NVIDIA GPU a report block describes, and the NVIDIA driver it shows."""
    keys = _REPORT_NAMES + (("driver",) if "video card" in block else ())
    name = next((block[k] for k in keys if _GPU_NAME.fullmatch(block.get(k, ""))), None)
    vendor = next((block[k].lower() for k in _REPORT_VENDORS if k in block), None)
    pci = next((m for k in _REPORT_PCI_KEYS if (m := _PCI_ID.search(block.get(k, "")))), None)
    device = pci.group(1) if pci else None
    for key in _REPORT_IDS:
        found = _NVCP_ID.fullmatch(block.get(key, "")) or _HEX_ID.fullmatch(block.get(key, ""))
        if device is None and found is not None:
            device = found.group(1).rjust(4, "0") if found.re is _HEX_ID else found.group(1)
            vendor = vendor or ("0x10de" if found.re is _NVCP_ID else None)
    if (name is not None and _NOT_GPU.search(name)) or vendor not in (None, "0x10de"):
        return None
    if name is None and pci is None and vendor is None:
        return None
    raw = next((block[k] for k in _REPORT_DRIVERS if k in block), "")
    driver = raw if _NVIDIA_VERSION.fullmatch(raw) else nvidia_driver(raw)
    return Gpu(name=name, pci_device_id=f"10de:{device.lower()}" if device else None), driver


def parse_windows_devices(text: str) -> HostFacts:
    """One Gpu per NVIDIA display object; the driver from the first one's DriverVersion."""
    facts = HostFacts()
    for record in _records(text):
        found = _gpu(record)
        if found is None:
            continue
        facts.gpus.append(Gpu(name=found[0], pci_device_id=found[1]))
        if facts.driver.version is None and "DriverVersion" in record:
            facts.driver.version = nvidia_driver(record["DriverVersion"])
    for name, device in _DXDIAG.findall(text):
        facts.gpus.append(Gpu(name=name.strip(), pci_device_id=f"10de:{device.lower()}"))
    for block in _report_blocks(text):
        report = _report_gpu(block)
        if report is not None:
            facts.gpus.append(report[0])
            facts.driver.version = facts.driver.version or report[1]
    return facts


def detect_windows_devices(text: str) -> bool:
    return (
        _DXDIAG.search(text) is not None
        or any(_gpu(r) for r in _records(text))
        or any(_report_gpu(b) for b in _report_blocks(text))
    )


FORMATS = [Format("Windows WMI / dxdiag", detect_windows_devices, parse_windows_devices)]

# No probe: nvidia-smi names the GPUs on a host; these listings are for pasted output.
PROBES: list[Probe] = []
