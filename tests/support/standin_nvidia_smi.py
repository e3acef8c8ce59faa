#!/usr/bin/env python3
"""A stand-in for nvidia-smi on end-to-end test hosts, which have no GPU.

It is not nvidia-smi and reads no hardware: it answers from a JSON description of GPUs, so the
host-side checks (gpuprov's nvidia-smi probe, the rules and the VRAM budget) see a chosen GPU and
driver while no GPU exists. It covers what the probe runs (checks/facts/parsers/nvidia_smi.py): the
--query-gpu CSV, `-q`; and also `-L`, `--version` and the default table, in nvidia-smi's formats.
A field missing from the description is not valid to query (as with an old driver and
compute_cap), a missing description reads as "no driver", an empty GPU list as "no devices".
Anything else exits 64, so a test notices what this stand-in does not cover.

Description: $STANDIN_NVIDIA_SMI_CONFIG, else /etc/standin-nvidia-smi/gpus.json:
{"driver_version": "580.159.03", "cuda_version": "13.0", "gpus": [{"index": 0, "name": ...,
"pci.bus_id": ..., "memory.total": "24576 MiB", ...}]}: each GPU maps --query-gpu field names to
values as the CSV prints them; "brand" and "architecture" feed `-q` only.
Standard library only: it runs under the test host's python3.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

CONFIG = "/etc/standin-nvidia-smi/gpus.json"
EXIT_UNSUPPORTED = 64
NO_DRIVER = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure "
    "that the latest NVIDIA driver is installed and running."
)
ALIASES = {
    "gpu_name": "name",
    "gpu_bus_id": "pci.bus_id",
    "gpu_uuid": "uuid",
    "gpu_serial": "serial",
}
UNITS = {
    "memory.total": "MiB",
    "memory.used": "MiB",
    "memory.free": "MiB",
    "memory.reserved": "MiB",
    "power.draw": "W",
    "power.limit": "W",
    "enforced.power.limit": "W",
    "fan.speed": "%",
    "utilization.gpu": "%",
    "utilization.memory": "%",
    "clocks.sm": "MHz",
    "clocks.mem": "MHz",
    "clocks.gr": "MHz",
    "clocks.max.sm": "MHz",
}
NOT_FIELDS = {"brand", "architecture"}  # keys of a GPU description that only `-q` shows
Q_WIDTH = 42  # where the colon sits in `nvidia-smi -q` of R5xx drivers
TABLE_TITLES = """\
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|                                         |                        |               MIG M. |
""".splitlines()


class Usage(Exception):
    """Arguments this stand-in does not implement."""


def load(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("gpus"), list):
        raise Usage(f"{path}: not a GPU description")
    return data


def gpu_value(config: dict[str, Any], gpu: dict[str, Any], name: str) -> str:
    """A field's value as the CSV prints it ("[N/A]" when the description lacks it)."""
    if name == "driver_version":
        return str(config["driver_version"])
    if name == "count":
        return str(len(config["gpus"]))
    if name == "timestamp":
        return time.strftime("%Y/%m/%d %H:%M:%S.000")
    value = gpu.get(name)
    return "[N/A]" if value is None else str(value)


def known_fields(config: dict[str, Any]) -> set[str]:
    fields = {"driver_version", "count", "timestamp"}
    for gpu in config["gpus"]:
        fields.update(k for k in gpu if k not in NOT_FIELDS)
    return fields


def _unit(config: dict[str, Any], name: str) -> str | None:
    if name in UNITS:
        return UNITS[name]
    for gpu in config["gpus"]:
        match = re.fullmatch(r"-?[\d.]+ (\S+)", str(gpu.get(name, "")))
        if match:
            return match.group(1)
    return None


def query_gpu(config: dict[str, Any], fields: Sequence[str], fmt: Sequence[str]) -> int:
    """`--query-gpu=a,b --format=csv[,noheader][,nounits]`."""
    known = known_fields(config)
    names = [ALIASES.get(f, f) for f in fields]
    for raw, name in zip(fields, names, strict=True):
        if name not in known:
            print(f'Field "{raw}" is not a valid field to query.\n')
            return 2
    units = {n: _unit(config, n) for n in names}
    if "noheader" not in fmt:
        header = [f"{n} [{units[n]}]" if units[n] else n for n in names]
        print(", ".join(header))
    for gpu in config["gpus"]:
        values = []
        for name in names:
            value = gpu_value(config, gpu, name)
            unit = units[name]
            if "nounits" in fmt and unit and value.endswith(f" {unit}"):
                value = value[: -len(unit) - 1]
            values.append(value)
        print(", ".join(values))
    return 0


def _plain(value: str) -> str:
    """A CSV value as `-q` prints it ("[N/A]" -> "N/A")."""
    return value[1:-1] if value.startswith("[") and value.endswith("]") else value


def _q_line(indent: int, key: str, value: str | None = None) -> str:
    pad = " " * indent
    return pad + key if value is None else f"{pad}{key:<{Q_WIDTH - indent}}: {value}"


def query_text(config: dict[str, Any]) -> None:
    """`nvidia-smi -q`: the header, and per GPU the lines gpuprov reads, with their neighbours."""
    lines = [
        "",
        "==============NVSMI LOG==============",
        "",
        _q_line(0, "Timestamp", time.strftime("%a %b %e %H:%M:%S %Y")),
        _q_line(0, "Driver Version", config["driver_version"]),
        _q_line(0, "CUDA Version", config["cuda_version"]),
        "",
        _q_line(0, "Attached GPUs", str(len(config["gpus"]))),
    ]
    for gpu in config["gpus"]:

        def v(name: str, gpu: dict[str, Any] = gpu) -> str:
            return _plain(gpu_value(config, gpu, name))

        mig = v("mig.mode.current")
        lines += [
            f"GPU {v('pci.bus_id')}",
            _q_line(4, "Product Name", v("name")),
            _q_line(4, "Product Brand", str(gpu.get("brand", "N/A"))),
            _q_line(4, "Product Architecture", str(gpu.get("architecture", "N/A"))),
            _q_line(4, "Display Mode", "Disabled"),
            _q_line(4, "Display Active", "Disabled"),
            _q_line(4, "Persistence Mode", v("persistence_mode")),
            _q_line(4, "MIG Mode"),
            _q_line(8, "Current", mig),
            _q_line(8, "Pending", mig),
            _q_line(4, "Serial Number", v("serial")),
            _q_line(4, "GPU UUID", v("uuid")),
            _q_line(4, "Minor Number", v("index")),
            _q_line(4, "PCI"),
            _q_line(8, "Bus Id", v("pci.bus_id")),
            _q_line(4, "FB Memory Usage"),
            _q_line(8, "Total", v("memory.total")),
            _q_line(8, "Used", v("memory.used") if "memory.used" in gpu else "1 MiB"),
            _q_line(4, "Compute Mode", v("compute_mode") if "compute_mode" in gpu else "Default"),
        ]
    print("\n".join(lines))


def list_gpus(config: dict[str, Any]) -> None:
    for gpu in config["gpus"]:
        index, name, uuid = (gpu_value(config, gpu, f) for f in ("index", "name", "uuid"))
        print(f"GPU {index}: {name} (UUID: {uuid})")


def version(config: dict[str, Any]) -> None:
    driver = str(config["driver_version"])
    print(f"NVIDIA-SMI version  : {driver}")
    print(f"NVML version        : {'.'.join(driver.split('.')[:2])}")
    print(f"DRIVER version      : {driver}")
    print(f"CUDA Version        : {config['cuda_version']}")


def _mib(value: str) -> str:
    match = re.match(r"\d+", value)
    return f"{match.group(0)}MiB" if match else "N/A"


def table(config: dict[str, Any]) -> None:
    """The default table, in the R550+ layout (91 columns)."""
    rule = "+" + "-" * 41 + "+" + "-" * 24 + "+" + "-" * 22 + "+"
    driver, cuda = str(config["driver_version"]), str(config["cuda_version"])
    lines = [
        time.strftime("%a %b %e %H:%M:%S %Y") + " " * 7,
        "+" + "-" * 89 + "+",
        f"| NVIDIA-SMI {driver:<23}Driver Version: {driver:<15}CUDA Version: {cuda:<9}|",
        "|" + rule[1:],
        *TABLE_TITLES,
        "|" + "=" * 41 + "+" + "=" * 24 + "+" + "=" * 22 + "|",
    ]
    for gpu in config["gpus"]:

        def v(name: str, default: str, gpu: dict[str, Any] = gpu) -> str:
            return _plain(str(gpu[name])) if name in gpu else default

        name = v("name", "N/A")
        name = name if len(name) <= 30 else name[:27] + "..."
        pm = "On" if v("persistence_mode", "Disabled") == "Enabled" else "Off"
        watts = f"{v('power.draw', '0 W').split()[0].split('.')[0]}W"
        cap = f"{v('power.limit', '0 W').split()[0].split('.')[0]}W"
        temp = f"{v('temperature.gpu', '30')}C"
        used = _mib(v("memory.used", "1 MiB"))
        total = _mib(v("memory.total", "N/A"))
        util = v("utilization.gpu", "0 %").replace(" ", "")
        lines += [
            f"|{v('index', '0'):>4}  {name:<30} {pm:<3} |"
            f"{v('pci.bus_id', 'N/A'):>19} {'Off':>3} |{v('ecc', 'N/A'):>21} |",
            f"|{v('fan.speed', '0 %').replace(' ', ''):>4}{temp:>6}{v('pstate', 'P8'):>6}"
            f"{watts + ' / ' + cap.rjust(5):>24} |{used:>11} / {total:>9} |"
            f"{util:>8}{v('compute_mode', 'Default'):>13} |",
            f"|{'':41}|{'':24}|{v('mig.mode.current', 'N/A'):>21} |",
            rule,
        ]
    lines += [
        " " * 89,
        "+" + "-" * 89 + "+",
        "| Processes:" + " " * 78 + "|",
        "|  GPU   GI   CI        PID   Type   Process name" + " " * 30 + "GPU Memory |",
        "|        ID   ID" + " " * 63 + "Usage      |",
        "|" + "=" * 89 + "|",
        "|  No running processes found" + " " * 61 + "|",
        "+" + "-" * 89 + "+",
    ]
    print("\n".join(lines))


def _query_args(args: Sequence[str]) -> tuple[list[str], list[str]] | None:
    """(fields, format options) of `--query-gpu=... --format=...`, else None."""
    fields: list[str] | None = None
    fmt: list[str] | None = None
    for arg in args:
        if arg.startswith("--query-gpu="):
            fields = arg.split("=", 1)[1].split(",")
        elif arg.startswith("--format="):
            fmt = arg.split("=", 1)[1].split(",")
        else:
            return None
    if fields is None or fmt is None or fmt[0] != "csv":
        return None
    if set(fmt[1:]) - {"noheader", "nounits"}:
        return None
    return [f.strip() for f in fields], fmt


def main(argv: Sequence[str]) -> int:
    args = list(argv)
    try:
        config = load(Path(os.environ.get("STANDIN_NVIDIA_SMI_CONFIG") or CONFIG))
        query = _query_args(args)
        if args not in ([], ["-q"], ["-L"], ["--list-gpus"], ["--version"]) and query is None:
            raise Usage("arguments")
    except Usage as exc:
        print(f"standin nvidia-smi: unsupported: {shlex.join(args)} ({exc})", file=sys.stderr)
        return EXIT_UNSUPPORTED
    if config is None:
        print(NO_DRIVER)
        return 9
    if args == ["--version"]:
        version(config)
        return 0
    if not config["gpus"]:
        print("No devices were found")
        return 6
    if query is not None:
        return query_gpu(config, *query)
    if args == ["-q"]:
        query_text(config)
    elif args in (["-L"], ["--list-gpus"]):
        list_gpus(config)
    else:
        table(config)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
